import Dispatch
import Glibc
import HTTP
@testable import HTTPServer
import Runtime
import Synchronization
import Testing

/// The limits no single client may exceed, at the server's level: the connection cap per peer,
/// the budget of request bodies held in memory, and the bound on log lines waiting for the logger.
@Suite(.serialized, .timeLimit(.minutes(3))) struct ServerLimitsTests {
    /// A router whose routes refuse requests over the connection cap with `429`, except
    /// `/healthz` (as AdTally's edge does for its probes).
    static func cappedRouter() -> Router {
        @Sendable func refuseOverCap(_ context: RequestContext) throws {
            guard context.overConnectionCap else { return }
            throw HTTPError(HTTPStatus(code: 429), code: "rate_limited", message: "too many open connections", headers: [("Retry-After", "1")])
        }
        var r = Router(errorBody: .testJSON)
        r.add(.get, "/healthz", .onWorker { _ in .json(.ok, #"{"status":"ok"}"#) })
        r.add(.get, "/echo/{n}") { context in
            try refuseOverCap(context)
            return .onWorker { ctx in .text(.ok, ctx.parameter("n") ?? "") }
        }
        r.add(.post, "/len") { context in
            try refuseOverCap(context)
            return .onWorker { ctx in .text(.ok, String(ctx.request.body.count)) }
        }
        return r
    }

    /// Polls `condition` every 20 ms for at most `seconds`.
    static func eventually(_ seconds: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = monotonicNow() + UInt64(seconds * 1e9)
        while monotonicNow() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return try condition()
    }

    @Test func connectionsBeyondAPeersCapAreServedOneRequestEach() throws {
        var config = ServerConfiguration()
        config.maxConnectionsPerPeer = 2
        config.uncappedPeer = { $0 == IPAddress("127.0.0.3") }
        try withServer(config, router: Self.cappedRouter()) { _, port in
            var first: TestClient? = try TestClient(port: port)
            let second = try TestClient(port: port)
            #expect(try first?.request("GET /echo/1 HTTP/1.1\r\n\r\n").status == 200)
            #expect(try second.request("GET /echo/2 HTTP/1.1\r\n\r\n").status == 200)
            // The third connection of 127.0.0.1: its request is refused, the connection closed.
            var third: TestClient? = try TestClient(port: port)
            let refused = try #require(try third?.request("GET /echo/3 HTTP/1.1\r\n\r\n"))
            #expect(refused.status == 429)
            #expect(refused.headers["Retry-After"] == "1")
            #expect(refused.headers["Connection"] == "close")
            #expect(refused.text.hasPrefix(#"{"error":{"code":"rate_limited","#))
            #expect(try third?.readUntilEOF().isEmpty == true)
            // The fourth asks for what is never limited: served, then closed all the same.
            var fourth: TestClient? = try TestClient(port: port)
            let served = try #require(try fourth?.request("GET /healthz HTTP/1.1\r\n\r\n"))
            #expect(served.status == 200)
            #expect(served.headers["Connection"] == "close")
            #expect(try fourth?.readUntilEOF().isEmpty == true)
            // The connections under the cap are kept alive.
            #expect(try second.request("GET /echo/4 HTTP/1.1\r\n\r\n").status == 200)
            // Another peer counts its own connections; a peer exempt from the cap counts none.
            for from in ["127.0.0.2", "127.0.0.3"] {
                let clients = try (0..<3).map { _ in try TestClient(port: port, from: from) }
                let statuses = try clients.map { try $0.request("GET /echo/5 HTTP/1.1\r\n\r\n").status }
                #expect(statuses == (from == "127.0.0.3" ? [200, 200, 200] : [200, 200, 429]), "\(from)")
            }
            // When one of 127.0.0.1's connections closes, a new one is under the cap again.
            first = nil
            third = nil
            fourth = nil
            #expect(try Self.eventually {
                try TestClient(port: port).request("GET /echo/6 HTTP/1.1\r\n\r\n").status == 200
            }, "no connection of 127.0.0.1 was served after two of its three closed")
        }
    }

    /// A connection over its peer's cap that asks nothing in its time is reset (no `FIN`, no
    /// `TIME_WAIT` on the server: a client hoarding connections makes hundreds a second); one
    /// within the cap that idles out is closed in order, and one over the cap that asks in time
    /// is answered.
    @Test func anIdleConnectionOverTheCapIsResetAfterItsTime() throws {
        var config = ServerConfiguration()
        config.maxConnectionsPerPeer = 1
        config.overCapTimeout = .milliseconds(300)
        config.idleTimeout = .milliseconds(900)
        try withServer(config, router: Self.cappedRouter()) { _, port in
            let within = try TestClient(port: port)
            #expect(try within.request("GET /echo/1 HTTP/1.1\r\n\r\n").status == 200)
            let asking = try TestClient(port: port)
            let idle = try TestClient(port: port)
            let answered = try asking.request("GET /echo/2 HTTP/1.1\r\n\r\n")
            #expect(answered.status == 429)
            #expect(try asking.readEnd() == .closed)
            let started = monotonicNow()
            #expect(try idle.readEnd() == .reset)
            let waited = Double(monotonicNow() - started) / 1e9
            #expect(waited < 0.8, "the over-cap connection waited \(waited) s, past its 0.3 s (and before the 0.9 s idle timeout)")
            #expect(try within.readEnd() == .closed, "a connection within the cap idles out with an orderly close")
        }
    }

    @Test func bodiesWaitForTheirTurnInTheBudgetThenGiveUpWith503() throws {
        var config = ServerConfiguration(limits: ParserLimits(maxBodyBytes: 1000))
        config.maxBufferedBodyBytes = 1500
        config.bodyBudgetWait = .seconds(2)
        try withServer(config, router: Self.cappedRouter()) { server, port in
            let body = String(repeating: "x", count: 1000)
            // The first request holds 1,000 bytes of the budget while its body trickles in.
            let slow = try TestClient(port: port, receiveTimeout: 10)
            try slow.send("POST /len HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + body.prefix(10))
            #expect(Self.eventually { server.bufferedBodyBytes == 1000 })
            // The second does not fit: it waits, its body unread, however fast it came.
            let waiting = try TestClient(port: port, receiveTimeout: 10)
            try waiting.send("POST /len HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + body)
            usleep(300_000)
            #expect(server.bufferedBodyBytes == 1000)
            // The first completes: its room goes to the second, which is answered too.
            try slow.send(String(body.dropFirst(10)))
            #expect(try slow.readResponse().text == "1000")
            #expect(try waiting.readResponse().text == "1000")
            #expect(Self.eventually { server.bufferedBodyBytes == 0 })

            // Held again, and this time never released within the wait: 503, and the connection closes.
            let holder = try TestClient(port: port, receiveTimeout: 10)
            try holder.send("POST /len HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + body.prefix(10))
            #expect(Self.eventually { server.bufferedBodyBytes == 1000 })
            let refused = try TestClient(port: port, receiveTimeout: 10)
            let started = monotonicNow()
            try refused.send("POST /len HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + body)
            let answer = try refused.readResponse()
            let waited = Double(monotonicNow() - started) / 1e9
            #expect(answer.status == 503)
            #expect(answer.headers["Retry-After"] == "1")
            #expect(answer.headers["Connection"] == "close")
            #expect(answer.text.hasPrefix(#"{"error":{"code":"unavailable","#))
            #expect(waited >= 1.5 && waited < 8, "answered after \(waited) s")
            // A body small enough to fit beside the one held goes at once.
            let small = try TestClient(port: port)
            #expect(try small.request("POST /len HTTP/1.1\r\nContent-Length: 400\r\n\r\n" + body.prefix(400)).text == "400")
            try holder.send(String(body.dropFirst(10)))
            #expect(try holder.readResponse().text == "1000")
            #expect(Self.eventually { server.bufferedBodyBytes == 0 })
        }
    }

    /// A log whose access lines block until `open`, as a write to a blocked standard output does.
    final class BlockedLog: Sendable {
        let gate = DispatchSemaphore(value: 0)
        let opened = Atomic<Bool>(false)
        let messages = Mutex<[String]>([])
        let accessLines = Atomic<Int>(0)

        /// Each line the logger writes, as its JSON text.
        func write(_ line: String) {
            if line.contains(#""msg":"request""#) {
                if !opened.load(ordering: .acquiring) { _ = gate.wait(timeout: .now() + 30) }
                accessLines.add(1, ordering: .relaxed)
            } else if let start = line.range(of: #""msg":""#), let end = line[start.upperBound...].firstIndex(of: "\"") {
                messages.withLock { $0.append(String(line[start.upperBound..<end])) }
            }
        }

        var logger: Logger { Logger(level: .debug) { [self] line in write(line) } }

        func open() {
            opened.store(true, ordering: .releasing)
            gate.signal()
        }
    }

    @Test func logLinesBeyondTheBoundAreDroppedAndCountedWhileTheLoggerIsStuck() throws {
        var config = ServerConfiguration()
        config.maxPendingLogLines = 20
        let log = BlockedLog()
        defer { log.open() }
        try withServer(config, router: Self.cappedRouter(), logger: log.logger) { server, port in
            let client = try TestClient(port: port)
            // The first line's batch gets the logger stuck; then 100 more requests are answered.
            #expect(try client.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
            usleep(200_000)
            for _ in 0..<100 { #expect(try client.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200) }
            #expect(server.droppedLogLines >= 70, "dropped \(server.droppedLogLines)")
            log.open()
            #expect(Self.eventually { log.messages.withLock { $0.contains { $0.hasPrefix("log lines dropped") } } })
            // Every line written or counted (the last one is handed over just after its response).
            #expect(Self.eventually { log.accessLines.load(ordering: .relaxed) + server.droppedLogLines == 101 })
        }
    }
}
