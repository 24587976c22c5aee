import Dispatch
import Foundation
import Glibc
import HTTP
import HTTPServer
import Runtime
import Synchronization
import Testing

private func basicRouter() -> Router {
    var r = Router(errorBody: .testJSON)
    r.get("/healthz") { _ in .json(.ok, #"{"status":"ok"}"#) }
    r.get("/echo/{n}") { ctx in
        // Varying delays: later requests often finish faster, so only the server's ordering keeps
        // responses in request order.
        let n = Int(ctx.parameter("n") ?? "") ?? 0
        usleep(UInt32((n * 7919) % 5) * 1000)
        return .text(.ok, ctx.parameter("n") ?? "")
    }
    r.post("/len") { ctx in .text(.ok, String(ctx.request.body.count)) }
    r.get("/v1/sessions/{session_id}/feed") { ctx in .text(.ok, ctx.parameter("session_id") ?? "") }
    r.put("/v1/sessions/{session_id}/feed") { _ in .text(.created, "") }
    r.get("/fail") { _ in
        throw HTTPError(.badRequest, code: "invalid_query", message: "bad \"from\"\n", field: "from", headers: [("Retry-After", "1")])
    }
    r.get("/crash") { _ in
        struct Secret: Error {}
        throw Secret()
    }
    r.get("/stream") { _ in
        HTTPResponse(status: .ok, headers: ["Content-Type": "text/csv"]) { writer in
            try writer.write("a,b\n")
            try writer.write("1,2\n")
            try writer.write("3,4\n")
        }
    }
    return r
}

@Suite(.serialized, .timeLimit(.minutes(5))) struct HTTPServerTests {
    @Test func errorAnswersAreInTheRoutersFormatPlainTextByDefault() throws {
        try withServer(router: Router()) { _, port in
            let r = try TestClient(port: port).request("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(r.status == 404)
            #expect(r.headers["Content-Type"] == "text/plain; charset=utf-8")
            #expect(r.text == "not_found: no such resource\n")
        }
    }

    @Test func keepAliveReusesTheConnection() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            for _ in 0..<3 {
                let r = try c.request("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(r.status == 200)
                #expect(r.text == #"{"status":"ok"}"#)
                #expect(r.headers["Content-Type"] == "application/json")
                #expect(r.headers["Date"]?.hasSuffix("GMT") == true)
                #expect(r.headers["Connection"] == nil)
                #expect(r.headers["X-Request-Id"]?.count == 32)
            }
        }
    }

    @Test func hundredPipelinedRequestsAnsweredInOrder() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            try c.send((0..<100).map { "GET /echo/\($0) HTTP/1.1\r\n\r\n" }.joined())
            for i in 0..<100 {
                let r = try c.readResponse()
                #expect(r.status == 200)
                #expect(r.text == String(i))
            }
        }
    }

    @Test func pipelinedRequestsAfterHalfCloseAreStillAnswered() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            try c.send("GET /echo/1 HTTP/1.1\r\n\r\nGET /echo/2 HTTP/1.1\r\n\r\n")
            c.shutdownWrite()
            #expect(try c.readResponse().text == "1")
            #expect(try c.readResponse().text == "2")
            #expect(try c.readUntilEOF().isEmpty)
        }
    }

    @Test func bodySplitOverManyWrites() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            try c.send("POST /len HTTP/1.1\r\nContent-Length: 1000\r\n\r\n")
            let body = [UInt8](repeating: 120, count: 1000)
            for k in stride(from: 0, to: 1000, by: 10) { try c.send(Array(body[k..<(k + 10)])) }
            #expect(try c.readResponse().text == "1000")
            try c.send("POST /len HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
            for piece in ["5\r\nhel", "lo\r\n", "3;x=1\r\nabc", "\r\n0\r\nT: 1\r\n", "\r\n"] { try c.send(piece) }
            #expect(try c.readResponse().text == "8")
        }
    }

    @Test(arguments: [
        ("414", "GET /\(String(repeating: "a", count: 100)) HTTP/1.1\r\n\r\n", 414, "uri_too_long"),
        ("431 size", "GET / HTTP/1.1\r\nX: \(String(repeating: "a", count: 300))\r\n\r\n", 431, "headers_too_large"),
        ("431 count", "GET / HTTP/1.1\r\n" + (0..<6).map { "H\($0): 1\r\n" }.joined() + "\r\n", 431, "headers_too_large"),
        ("413 content-length", "POST /len HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413, "payload_too_large"),
        ("413 chunked", "POST /len HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413, "payload_too_large"),
        ("400 smuggling", "POST /len HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "bad_request"),
        ("400 syntax", "GET /healthz HTTP/1.1\r\nBad Header: 1\r\n\r\n", 400, "bad_request"),
        ("400 percent", "GET /%zz HTTP/1.1\r\n\r\n", 400, "bad_request"),
        ("505", "GET /healthz HTTP/2.0\r\n\r\n", 505, "http_version_not_supported"),
    ])
    func limitsAnsweredWithTheirStatusAndClose(_ name: String, _ raw: String, _ status: Int, _ code: String) throws {
        let config = ServerConfiguration(limits: ParserLimits(maxHeadBytes: 200, maxTargetBytes: 50, maxHeaderCount: 5, maxBodyBytes: 100))
        try withServer(config, router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            let r = try c.request(raw)
            #expect(r.status == status, "\(name)")
            #expect(r.headers["Connection"] == "close", "\(name)")
            #expect(r.headers["Content-Type"] == "application/json")
            #expect(r.text.hasPrefix(#"{"error":{"code":"\#(code)","#), "\(name): \(r.text)")
            #expect(try c.readUntilEOF().isEmpty)
        }
    }

    @Test func headerTimeoutAnswers408AndCloses() throws {
        let config = ServerConfiguration(headerReadTimeout: .milliseconds(300))
        try withServer(config, router: basicRouter()) { _, port in
            let c = try TestClient(port: port, receiveTimeout: 3)
            try c.send("GET /healthz HTT")
            let r = try c.readResponse()
            #expect(r.status == 408)
            #expect(r.headers["Connection"] == "close")
            #expect(try c.readUntilEOF().isEmpty)
        }
    }

    @Test func idleKeepAliveClosedSilently() throws {
        let config = ServerConfiguration(idleTimeout: .milliseconds(300))
        try withServer(config, router: basicRouter()) { server, port in
            let c = try TestClient(port: port, receiveTimeout: 3)
            #expect(try c.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
            let start = DispatchTime.now()
            #expect(try c.readUntilEOF().isEmpty)
            let waited = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
            #expect(waited > 0.15 && waited < 2.5)
        }
    }

    @Test func expectContinueSends100BeforeTheBody() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            try c.send("POST /len HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
            #expect(try c.readResponse().status == 100)
            try c.send("abcd")
            #expect(try c.readResponse().text == "4")
        }
    }

    @Test func expectContinueRefusedAtOnce() throws {
        let config = ServerConfiguration(limits: ParserLimits(maxBodyBytes: 10))
        try withServer(config, router: basicRouter()) { _, port in
            let big = try TestClient(port: port)
            let r = try big.request("POST /len HTTP/1.1\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n")
            #expect(r.status == 413)
            let unknown = try TestClient(port: port)
            let r2 = try unknown.request("POST /nope HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            #expect(r2.status == 404)
            #expect(r2.headers["Connection"] == "close")
        }
    }

    @Test func connectionsBeyondTheMaximumGet503() throws {
        let config = ServerConfiguration(maxConnections: 2)
        try withServer(config, router: basicRouter()) { server, port in
            let a = try TestClient(port: port), b = try TestClient(port: port)
            #expect(try a.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
            #expect(try b.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
            #expect(server.openConnections == 2)
            let c = try TestClient(port: port)
            let r = try c.request("GET /healthz HTTP/1.1\r\n\r\n")
            #expect(r.status == 503)
            #expect(r.headers["Retry-After"] == "1")
            #expect(r.text == #"{"error":{"code":"unavailable","message":"too many open connections"}}"#)
            #expect(try c.readUntilEOF().isEmpty)
        }
    }

    @Test func notFoundAndMethodNotAllowed() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            let r = try c.request("POST /v1/sessions/s1/feed HTTP/1.1\r\n\r\n")
            #expect(r.status == 405)
            #expect(r.headers["Allow"] == "GET, HEAD, PUT")
            #expect(r.text.contains(#""code":"method_not_allowed""#))
            #expect(try c.request("GET //healthz HTTP/1.1\r\n\r\n").status == 404)
            #expect(try c.request("GET /healthz/ HTTP/1.1\r\n\r\n").status == 404)
            #expect(try c.request("GET /v1/sessions//feed HTTP/1.1\r\n\r\n").status == 404)
            let p = try c.request("GET /v1/sessions/a%2Fb%20c/feed HTTP/1.1\r\n\r\n")
            #expect(p.text == "a/b c")
        }
    }

    /// RFC 9110, 9.1: every GET route answers HEAD with the GET answer's status and headers and no
    /// body. The request after each HEAD on the same connection proves no body bytes were sent.
    @Test func headAnswersEveryGetRouteWithoutABody() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            for target in ["/healthz", "/v1/sessions/s1/feed", "/nowhere", "/fail"] {
                let get = try TestClient(port: port).request("GET \(target) HTTP/1.1\r\n\r\n")
                try c.send("HEAD \(target) HTTP/1.1\r\n\r\n")
                let head = try c.readResponse(bodyless: true)
                #expect(head.status == get.status, "\(target)")
                #expect(head.headers["Content-Length"] == String(get.body.count), "\(target)")
                #expect(head.headers["Content-Type"] == get.headers["Content-Type"], "\(target)")
                #expect(head.headers["Connection"] == get.headers["Connection"], "\(target)")
                if head.headers["Connection"] == "close" {
                    #expect(try c.readUntilEOF().isEmpty, "\(target): bytes after the head of a HEAD answer")
                    return
                }
                #expect(try c.request("GET /echo/7 HTTP/1.1\r\n\r\n").text == "7", "\(target): the HEAD answer had a body")
            }
        }
    }

    @Test func headOfAStreamedAnswerIsItsHeadOnly() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            try c.send("HEAD /stream HTTP/1.1\r\n\r\n")
            let head = try c.readResponse(bodyless: true)
            #expect(head.status == 200)
            #expect(head.headers["Transfer-Encoding"] == "chunked")
            #expect(head.headers["Content-Type"] == "text/csv")
            #expect(try c.request("GET /echo/3 HTTP/1.1\r\n\r\n").text == "3", "the HEAD answer had a body")
            // HTTP/1.0 has no chunked coding: the GET answer's body ends with the connection, and the
            // HEAD answer is that head (no Content-Length, Connection: close), then the close.
            let old = try TestClient(port: port)
            try old.send("HEAD /stream HTTP/1.0\r\n\r\n")
            let head10 = String(decoding: try old.readUntilEOF(), as: UTF8.self)
            #expect(head10.hasPrefix("HTTP/1.1 200") && head10.hasSuffix("\r\n\r\n"), "\(head10)")
            #expect(head10.contains("Connection: close") && !head10.contains("Content-Length") && !head10.contains("Transfer-Encoding"))
        }
    }

    @Test func allowListsHeadWhereverGetIsServed() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            let feed = try c.request("DELETE /v1/sessions/s1/feed HTTP/1.1\r\n\r\n")
            #expect(feed.status == 405)
            #expect(feed.headers["Allow"] == "GET, HEAD, PUT")
            try c.send("HEAD /len HTTP/1.1\r\n\r\n")
            let len = try c.readResponse(bodyless: true)
            #expect(len.status == 405)
            #expect(len.headers["Allow"] == "POST")
            #expect(Int(len.headers["Content-Length"] ?? "") ?? 0 > 0)
            #expect(try c.request("GET /echo/5 HTTP/1.1\r\n\r\n").text == "5", "the HEAD 405 had a body")
        }
        var router = basicRouter()
        router.add(.head, "/healthz", .onWorker { _ in HTTPResponse(status: .noContent) })
        #expect(router.routeTable.filter { $0.pattern == "/healthz" }.map(\.method) == ["GET", "HEAD"])
        #expect(router.routeTable.filter { $0.pattern == "/len" }.map(\.method) == ["POST"])
    }

    @Test func handlerErrorsBecomeJSONErrorBodies() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            let r = try c.request("GET /fail HTTP/1.1\r\n\r\n")
            #expect(r.status == 400)
            #expect(r.headers["Retry-After"] == "1")
            #expect(r.text == #"{"error":{"code":"invalid_query","message":"bad \"from\"\n","field":"from"}}"#)
            #expect(r.headers["Connection"] == "close", "every 400 closes, as API.md section 5 says")
            let c2 = try TestClient(port: port)
            let crash = try c2.request("GET /crash HTTP/1.1\r\n\r\n")
            #expect(crash.status == 500)
            #expect(crash.text == #"{"error":{"code":"internal","message":"internal error"}}"#)
            #expect(crash.headers["Connection"] == nil)
        }
    }

    @Test func streamedResponseIsChunked() throws {
        try withServer(router: basicRouter()) { _, port in
            let c = try TestClient(port: port)
            let r = try c.request("GET /stream HTTP/1.1\r\n\r\n")
            #expect(r.headers["Transfer-Encoding"] == "chunked")
            #expect(r.headers["Content-Length"] == nil)
            #expect(r.text == "a,b\n1,2\n3,4\n")
            #expect(try c.request("GET /healthz HTTP/1.1\r\n\r\n").status == 200)
            // HTTP/1.0: the bytes as they come, the body delimited by the close.
            let old = try TestClient(port: port)
            try old.send("GET /stream HTTP/1.0\r\n\r\n")
            let r10 = String(decoding: try old.readUntilEOF(), as: UTF8.self)
            #expect(r10.hasPrefix("HTTP/1.1 200"))
            #expect(r10.contains("Connection: close") && !r10.contains("Content-Length") && !r10.contains("Transfer-Encoding"))
            #expect(r10.hasSuffix("\r\n\r\na,b\n1,2\n3,4\n"), "\(r10)")
        }
    }

    @Test func http10ClosesUnlessKeepAlive() throws {
        try withServer(router: basicRouter()) { _, port in
            let a = try TestClient(port: port)
            let r = try a.request("GET /healthz HTTP/1.0\r\n\r\n")
            #expect(r.headers["Connection"] == "close")
            #expect(try a.readUntilEOF().isEmpty)
            let b = try TestClient(port: port)
            let k = try b.request("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            #expect(k.headers["Connection"] == "keep-alive")
            #expect(try b.request("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").status == 200)
            let c = try TestClient(port: port)
            #expect(try c.request("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n").headers["Connection"] == "close")
            #expect(try c.readUntilEOF().isEmpty)
        }
    }

    @Test func requestIDEchoedAndObserverToldOncePerResponse() throws {
        let records = Mutex<[ResponseRecord]>([])
        let observer = ClosureObserver { r in records.withLock { $0.append(r) } }
        try withServer(router: basicRouter(), observer: observer) { _, port in
            let c = try TestClient(port: port)
            let r = try c.request("GET /v1/sessions/s9/feed?x=1 HTTP/1.1\r\nX-Request-Id: abc-123\r\n\r\n")
            #expect(r.headers["X-Request-Id"] == "abc-123")
            _ = try c.request("GET /nowhere HTTP/1.1\r\n\r\n")
            _ = try c.request("GET /healthz HTTP/1.1\r\n\r\n")
            let seen = records.withLock { $0 }
            #expect(seen.count >= 2)
            #expect(seen.first?.route == "/v1/sessions/{session_id}/feed")
            #expect(seen.first?.path == "/v1/sessions/s9/feed")
            #expect(seen.first?.status == 200)
            #expect(seen.first?.method == .get)
            #expect(seen.dropFirst().first?.route == "unmatched")
            #expect(seen.dropFirst().first?.status == 404)
        }
    }

    /// A logger that implements only `log`: the server's access lines reach it through the default
    /// `logAccess`, as ordinary lines with the access fields, in request order, and the lines
    /// around them keep their order (the server's own "stopped" comes after the access lines that
    /// were still waiting for their batch).
    @Test func accessLinesReachAPlainLoggerInOrderWithTheirFields() throws {
        let lines = Mutex<[String]>([])
        let logger = Logger(level: .debug) { line in lines.withLock { $0.append(line) } }
        let server = HTTPServer(configuration: ServerConfiguration(host: "127.0.0.1", port: 0), router: basicRouter(), logger: logger)
        try server.start()
        let port = try #require(server.boundPort)
        let c = try TestClient(port: port)
        _ = try c.request("GET /healthz HTTP/1.1\r\nX-Request-Id: first\r\n\r\n")
        _ = try c.request("GET /nowhere HTTP/1.1\r\nX-Request-Id: second\r\n\r\n")
        server.shutdown(gracePeriod: .seconds(2))

        let written = lines.withLock { $0 }.map { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? ["unreadable": line]
        }
        let messages = written.map { $0["msg"] as? String ?? "" }
        let requests = written.filter { $0["msg"] as? String == "request" }
        #expect(requests.count == 2, "\(messages)")
        #expect(messages.first == "listening" && messages.last == "stopped", "\(messages)")
        let names = requests.map { Set($0.keys) }
        #expect(names.first == ["ts", "level", "msg", "method", "status", "bytes", "duration_ms", "route", "request_id"])
        #expect(names.last == ["ts", "level", "msg", "method", "status", "bytes", "duration_ms", "route", "request_id", "code"],
                "an error answer's line carries its code")
        #expect(requests.first?["request_id"] as? String == "first" && requests.first?["status"] as? Int == 200
                && requests.first?["route"] as? String == "/healthz")
        #expect(requests.last?["request_id"] as? String == "second" && requests.last?["status"] as? Int == 404
                && requests.last?["route"] as? String == "unmatched")
    }
}
