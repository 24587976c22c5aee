import Dispatch
import Glibc
import HTTP
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// Tests about blocking handlers, disconnects and shutdown, synchronised with semaphores that the
/// handlers signal, never with sleeps.
@Suite(.serialized, .timeLimit(.minutes(5))) struct HTTPServerConcurrencyTests {
    @Test func blockingHandlerDoesNotStallOtherConnections() throws {
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        var r = Router()
        r.get("/block") { _ in
            entered.signal()
            release.wait()
            return .text(.ok, "unblocked")
        }
        r.get("/fast") { _ in .text(.ok, "fast") }
        try withServer(router: r) { _, port in
            let slow = try TestClient(port: port)
            try slow.send("GET /block HTTP/1.1\r\n\r\n")
            #expect(entered.wait(timeout: .now() + 5) == .success)
            let fast = try TestClient(port: port)
            #expect(try fast.request("GET /fast HTTP/1.1\r\n\r\n").text == "fast")
            release.signal()
            #expect(try slow.readResponse().text == "unblocked")
        }
    }

    @Test func clientDisconnectingMidRequestLeavesServerServing() throws {
        var r = Router()
        r.get("/healthz") { _ in .text(.ok, "ok") }
        r.post("/len") { ctx in .text(.ok, String(ctx.request.body.count)) }
        try withServer(router: r) { server, port in
            do {
                let gone = try TestClient(port: port)
                try gone.send("POST /len HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc")
            }
            do {
                let gone = try TestClient(port: port)
                try gone.send("GET /heal")
            }
            let c = try TestClient(port: port)
            #expect(try c.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
        }
    }

    @Test func clientDisconnectingMidResponseStopsTheProducer() throws {
        let outcome = DispatchSemaphore(value: 0)
        let producerSawClientGone = Atomic<Bool>(false)
        var r = Router()
        r.get("/healthz") { _ in .text(.ok, "ok") }
        r.get("/big") { _ in
            HTTPResponse(status: .ok) { writer in
                defer { outcome.signal() }
                let piece = [UInt8](repeating: 65, count: 64 * 1024)
                do {
                    for _ in 0..<100_000 { try writer.write(piece) }
                } catch {
                    producerSawClientGone.store(error is ClientGone, ordering: .relaxed)
                    throw error
                }
            }
        }
        var config = ServerConfiguration()
        config.streamBufferBytes = 64 * 1024
        try withServer(config, router: r) { _, port in
            do {
                let c = try TestClient(port: port)
                try c.send("GET /big HTTP/1.1\r\n\r\n")
                var chunk = [UInt8](repeating: 0, count: 4096)
                _ = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            } // closed here, with most of the body unread
            #expect(outcome.wait(timeout: .now() + 10) == .success)
            let sawClientGone = producerSawClientGone.load(ordering: .relaxed)
            #expect(sawClientGone)
            let other = try TestClient(port: port)
            #expect(try other.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
        }
    }

    @Test func shutdownFinishesTheRequestInFlightAndReturns() throws {
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        var r = Router()
        r.get("/healthz") { _ in .text(.ok, "ok") }
        r.get("/slow") { _ in
            entered.signal()
            release.wait()
            return .text(.ok, "finished")
        }
        let server = HTTPServer(configuration: ServerConfiguration(host: "127.0.0.1", port: 0), router: r, logger: .discarding)
        try server.start()
        let port = try #require(server.boundPort)
        let idle = try TestClient(port: port)
        #expect(try idle.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
        let busy = try TestClient(port: port)
        try busy.send("GET /slow HTTP/1.1\r\n\r\n")
        #expect(entered.wait(timeout: .now() + 5) == .success)

        let returned = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            server.shutdown(gracePeriod: .seconds(5))
            returned.signal()
        }
        // The idle keep-alive connection is closed at once: that shows shutdown has begun.
        #expect(try idle.readUntilEOF().isEmpty)
        #expect(returned.wait(timeout: .now()) == .timedOut, "shutdown must wait for the request in flight")
        release.signal()
        let response = try busy.readResponse()
        #expect(response.text == "finished")
        #expect(response.headers["Connection"] == "close")
        #expect(returned.wait(timeout: .now() + 5) == .success)
        server.waitUntilStopped()
        #expect(throws: (any Error).self) { _ = try TestClient(port: port) }
    }

    @Test func shutdownForceClosesAfterTheDeadline() throws {
        let release = DispatchSemaphore(value: 0), entered = DispatchSemaphore(value: 0)
        var r = Router()
        r.get("/stuck") { _ in
            entered.signal()
            release.wait()
            return .text(.ok, "late")
        }
        let server = HTTPServer(configuration: ServerConfiguration(host: "127.0.0.1", port: 0), router: r, logger: .discarding)
        try server.start()
        let c = try TestClient(port: try #require(server.boundPort))
        try c.send("GET /stuck HTTP/1.1\r\n\r\n")
        #expect(entered.wait(timeout: .now() + 5) == .success)
        server.shutdown(gracePeriod: .milliseconds(200))
        #expect(try c.readUntilEOF().isEmpty)
        #expect(server.openConnections == 0)
        release.signal()
    }
}
