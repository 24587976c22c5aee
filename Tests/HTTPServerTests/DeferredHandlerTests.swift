import Dispatch
import HTTP
import HTTPServer
import Synchronization
import Testing

/// Requests of a deferred route that have not been answered yet, as the handler left them.
private final class Parked: Sendable {
    private let responders = Mutex<[String: HTTPResponder]>([:])
    private let arrived = DispatchSemaphore(value: 0)

    func park(_ name: String, _ responder: HTTPResponder) {
        responders.withLock { $0[name] = responder }
        arrived.signal()
    }

    /// Waits (up to 5 s) until `count` more requests were parked.
    func waitFor(_ count: Int) -> Bool {
        (0..<count).allSatisfy { _ in arrived.wait(timeout: .now() + .seconds(5)) == .success }
    }

    func answer(_ name: String, _ response: HTTPResponse) {
        let responder = responders.withLock { $0.removeValue(forKey: name) }
        responder?.respond(response)
    }
}

@Suite(.timeLimit(.minutes(5))) struct DeferredHandlerTests {
    private static func router(_ parked: Parked) -> Router {
        var r = Router(errorBody: .testJSON)
        r.add(.get, "/later/{name}", .deferred { context, responder in
            parked.park(context.parameter("name") ?? "", responder)
        })
        r.add(.get, "/fail", .deferred { _, _ in
            throw HTTPError(.conflict, code: "busy", message: "try later")
        })
        r.add(.get, "/forget", .deferred { _, _ in })
        r.add(.get, "/twice", .deferred { _, responder in
            responder.respond(.text(.ok, "first"))
            responder.respond(.text(.ok, "second"))
        })
        r.add(.get, "/stream", .deferred { _, responder in
            DispatchQueue.global().async {
                responder.respond(HTTPResponse(status: .ok, headers: ["Content-Type": "text/csv"]) { writer in
                    try writer.write("a,b\n")
                    try writer.write("1,2\n")
                })
            }
        })
        return r
    }

    @Test func waitingRequestsHoldNoThread() throws {
        // One worker thread: requests whose handler waited on it would be answered one at a time,
        // the second only after the first. Deferred, all three wait at once and are answered in
        // any order, from the test's thread, after their handlers returned.
        var configuration = ServerConfiguration()
        configuration.maxWorkerThreads = 1
        configuration.ioQueueCount = 1
        let parked = Parked()
        try withServer(configuration, router: Self.router(parked)) { _, port in
            let clients = try (0..<3).map { _ in try TestClient(port: port) }
            for (n, client) in clients.enumerated() { try client.send("GET /later/r\(n) HTTP/1.1\r\nHost: x\r\n\r\n") }
            #expect(parked.waitFor(3))
            for n in [2, 0, 1] {
                parked.answer("r\(n)", .text(.ok, "answer \(n)"))
                let response = try clients[n].readResponse()
                #expect(response.status == 200)
                #expect(response.text == "answer \(n)")
                #expect(response.headers["X-Request-Id"]?.count == 32)
            }
            // The connections stay usable.
            try clients[1].send("GET /later/again HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(parked.waitFor(1))
            parked.answer("again", .json(.created, "{}"))
            #expect(try clients[1].readResponse().status == 201)
        }
    }

    @Test func aLargeBodyIsHandledOffTheIOQueue() throws {
        // One IO queue. A handler given a body over the inline limit blocks until released: had it
        // run on the IO queue, no other connection would be served meanwhile. A small body runs
        // inline and is answered as well.
        var configuration = ServerConfiguration()
        configuration.ioQueueCount = 1
        let release = DispatchSemaphore(value: 0)
        var r = Router()
        r.add(.post, "/hold", .deferred { context, responder in
            _ = release.wait(timeout: .now() + .seconds(10))
            responder.respond(.text(.ok, String(context.request.body.count)))
        })
        r.add(.post, "/len", .deferred { context, responder in
            responder.respond(.text(.ok, String(context.request.body.count)))
        })
        try withServer(configuration, router: r) { _, port in
            let large = Router.inlineDeferredBodyLimit + 1
            let held = try TestClient(port: port)
            try held.send("POST /hold HTTP/1.1\r\nHost: x\r\nContent-Length: \(large)\r\n\r\n" + String(repeating: "x", count: large))
            let other = try TestClient(port: port)
            for size in [0, 10, Router.inlineDeferredBodyLimit] {
                let response = try other.request("POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: \(size)\r\n\r\n" + String(repeating: "y", count: size))
                #expect(response.text == String(size))
            }
            release.signal()
            #expect(try held.readResponse().text == String(large))
        }
    }

    @Test func aThrownErrorIsTheAnswer() throws {
        try withServer(router: Self.router(Parked())) { _, port in
            let response = try TestClient(port: port).request("GET /fail HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(response.status == 409)
            #expect(response.text == #"{"error":{"code":"busy","message":"try later"}}"#)
        }
    }

    @Test func aForgottenResponderAnswers500AndOnlyTheFirstAnswerCounts() throws {
        try withServer(router: Self.router(Parked())) { _, port in
            let client = try TestClient(port: port)
            let forgotten = try client.request("GET /forget HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(forgotten.status == 500)
            #expect(forgotten.text.contains(#""code":"internal""#))
            let twice = try client.request("GET /twice HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(twice.text == "first")
            // Nothing else was written: the next answer on the connection is the next request's.
            let next = try client.request("GET /fail HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(next.status == 409)
        }
    }

    @Test func anErrorThrownWhileAnsweringLaterIsAnsweredAsAThrowingHandlerWouldBe() {
        struct Broken: Error {}
        let answers = Mutex<[HTTPResponse]>([])
        let reported = Mutex<[String]>([])
        let responder = { HTTPResponder(format: .testJSON, unexpected: { error in reported.withLock { $0.append(String(describing: error)) } }) { response in
            answers.withLock { $0.append(response) }
        } }
        responder().respond { throw HTTPError(.conflict, code: "busy", message: "try later") }
        responder().respond { throw Broken() }
        responder().respond { .text(.ok, "fine") }
        let statuses = answers.withLock { $0.map(\.status.code) }
        #expect(statuses == [409, 500, 200])
        if case .bytes(let body) = answers.withLock({ $0[1].body }) {
            #expect(String(decoding: body, as: UTF8.self).contains(#""code":"internal""#))
        } else {
            Issue.record("the 500 has no plain body")
        }
        // Only the error that is not an HTTP answer is reported (the server logs it).
        #expect(reported.withLock { $0 } == ["Broken()"])
    }

    @Test func aStreamedAnswerIsSentChunked() throws {
        try withServer(router: Self.router(Parked())) { _, port in
            let response = try TestClient(port: port).request("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(response.status == 200)
            #expect(response.headers["Transfer-Encoding"] == "chunked")
            #expect(response.text == "a,b\n1,2\n")
        }
    }

    @Test func anInProcessCallerGetsTheDeferredAnswer() async throws {
        var r = Router()
        r.add(.get, "/x", .deferred { _, responder in
            DispatchQueue.global().async { responder.respond(.text(.accepted, "done")) }
        })
        let head = HTTPRequestParser().parse(Array("GET /x HTTP/1.1\r\n\r\n".utf8))
        guard case .complete(let request, _) = head else {
            Issue.record("unparseable")
            return
        }
        let answer = await r.respond(to: request)
        #expect(answer.response.status == .accepted)
    }
}
