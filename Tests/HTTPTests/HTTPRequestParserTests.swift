import HTTP
import Testing

/// Feeds `bytes` whole, then checks every proper prefix answers `.incomplete` (for accepted requests)
/// or is not a different refusal, and returns the whole-input result.
private func parseAllWays(_ text: String, limits: ParserLimits = ParserLimits()) -> RequestParseResult {
    let parser = HTTPRequestParser(limits: limits)
    return parser.parse(Array(text.utf8))
}

private func status(_ r: RequestParseResult) -> Int {
    switch r {
    case .complete: 200
    case .incomplete: 0
    case .invalid(let e): e.status.code
    }
}

struct AcceptedCase: CustomTestStringConvertible, Sendable {
    let name: String
    let raw: String
    let body: String
    var testDescription: String { name }
}

let acceptedCases: [AcceptedCase] = [
    .init(name: "simple GET", raw: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", body: ""),
    .init(name: "HTTP/1.0 without headers", raw: "GET / HTTP/1.0\r\n\r\n", body: ""),
    .init(name: "content-length body", raw: "POST /v1/events HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", body: "hello"),
    .init(name: "repeated same content-length", raw: "POST /a HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", body: "abc"),
    .init(name: "content-length list of equal values", raw: "POST /a HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc", body: "abc"),
    .init(name: "chunked body", raw: "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", body: "hello world"),
    .init(name: "chunk extensions and trailers", raw: "POST /a HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n5;name=val;x\r\nhello\r\nA ; q=\"z\"\r\n0123456789\r\n0;last\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n", body: "hello0123456789"),
    .init(name: "leading empty line ignored", raw: "\r\nGET / HTTP/1.1\r\n\r\n", body: ""),
    .init(name: "value with obs-text and tabs", raw: "GET / HTTP/1.1\r\nX-A:\tvalue \u{00E9} x \t\r\n\r\n", body: ""),
    .init(name: "absolute-form target", raw: "GET http://example.com/healthz?x=1 HTTP/1.1\r\n\r\n", body: ""),
]

@Test(.timeLimit(.minutes(3)), arguments: acceptedCases)
func acceptsWholeAndBytewise(_ c: AcceptedCase) throws {
    let bytes = Array(c.raw.utf8)
    let parser = HTTPRequestParser()
    guard case .complete(let request, let consumed) = parser.parse(bytes) else {
        Issue.record("\(c.name): not complete")
        return
    }
    #expect(consumed == bytes.count)
    #expect(request.body == Array(c.body.utf8))
    for k in 0..<bytes.count {
        guard case .incomplete = parser.parse(Array(bytes[0..<k])) else {
            Issue.record("\(c.name): prefix of \(k) bytes did not answer incomplete")
            return
        }
    }
    // Resumable chunked decoding fed byte by byte agrees with the one-shot answer.
    if case .complete(let head, let headLength) = parser.parseHead(bytes), head.bodyFraming == .chunked {
        var decoder = ChunkedBodyDecoder()
        let body = Array(bytes[headLength...])
        for k in 0..<body.count {
            guard case .incomplete = decoder.decode(body[0..<k]) else {
                Issue.record("\(c.name): chunked prefix \(k) not incomplete")
                return
            }
        }
        guard case .complete(let decoded, let used) = decoder.decode(body[...]) else {
            Issue.record("\(c.name): chunked body not complete byte by byte")
            return
        }
        #expect(decoded == Array(c.body.utf8))
        #expect(used == body.count)
    }
}

struct RejectedCase: CustomTestStringConvertible, Sendable {
    let name: String
    let raw: String
    let status: Int
    var limits = ParserLimits()
    var testDescription: String { name }
}

let smallLimits = ParserLimits(maxHeadBytes: 200, maxTargetBytes: 50, maxHeaderCount: 3, maxBodyBytes: 10)

let rejectedCases: [RejectedCase] = [
    .init(name: "bad request line: no version", raw: "GET /\r\n\r\n", status: 400),
    .init(name: "bad request line: two spaces", raw: "GET  / HTTP/1.1\r\n\r\n", status: 400),
    .init(name: "bad request line: lowercase http", raw: "GET / http/1.1\r\n\r\n", status: 400),
    .init(name: "bad request line: bad method char", raw: "G(T / HTTP/1.1\r\n\r\n", status: 400),
    .init(name: "bad request line: version garbage", raw: "GET / HTTP/1.x\r\n\r\n", status: 400),
    .init(name: "bad request line: bare LF", raw: "GET / HTTP/1.1\n\r\n", status: 400),
    .init(name: "bad token in field name", raw: "GET / HTTP/1.1\r\nX(A: 1\r\n\r\n", status: 400),
    .init(name: "space before colon", raw: "GET / HTTP/1.1\r\nHost : x\r\n\r\n", status: 400),
    .init(name: "obs-fold", raw: "GET / HTTP/1.1\r\nX-A: 1\r\n  continued\r\n\r\n", status: 400),
    .init(name: "NUL in value", raw: "GET / HTTP/1.1\r\nX-A: a\u{0}b\r\n\r\n", status: 400),
    .init(name: "bare CR in value", raw: "GET / HTTP/1.1\r\nX-A: a\rb\r\n\r\n", status: 400),
    .init(name: "bare LF in value", raw: "GET / HTTP/1.1\r\nX-A: a\nb\r\n\r\n", status: 400),
    .init(name: "content-length non-digits", raw: "POST / HTTP/1.1\r\nContent-Length: 1a\r\n\r\n", status: 400),
    .init(name: "content-length negative", raw: "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", status: 400),
    .init(name: "content-length plus sign", raw: "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n", status: 400),
    .init(name: "content-length and transfer-encoding", raw: "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400),
    .init(name: "repeated different content-length", raw: "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", status: 400),
    .init(name: "transfer-encoding other than chunked", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400),
    .init(name: "transfer-encoding gzip, chunked", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 400),
    .init(name: "transfer-encoding in HTTP/1.0", raw: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400),
    .init(name: "bad chunk size", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: 400),
    .init(name: "chunk data without CRLF", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n", status: 400),
    .init(name: "chunk size overflow", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFFFFFF\r\n", status: 413),
    .init(name: "malformed percent-encoding in path", raw: "GET /a%zz HTTP/1.1\r\n\r\n", status: 400),
    .init(name: "malformed percent-encoding in query", raw: "GET /a?x=%4 HTTP/1.1\r\n\r\n", status: 400),
    .init(name: "asterisk target", raw: "GET * HTTP/1.1\r\n\r\n", status: 400),
    .init(name: "414 target too long", raw: "GET /\(String(repeating: "a", count: 60)) HTTP/1.1\r\n\r\n", status: 414, limits: smallLimits),
    .init(name: "414 target too long, incomplete", raw: "GET /\(String(repeating: "a", count: 60))", status: 414, limits: smallLimits),
    .init(name: "431 by size", raw: "GET / HTTP/1.1\r\nX-A: \(String(repeating: "a", count: 300))\r\n\r\n", status: 431, limits: smallLimits),
    .init(name: "431 by size, incomplete", raw: "GET / HTTP/1.1\r\nX-A: \(String(repeating: "a", count: 300))", status: 431, limits: smallLimits),
    .init(name: "431 by count", raw: "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", status: 431, limits: smallLimits),
    .init(name: "400 wins over 431 by count", raw: "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD : 4\r\n\r\n", status: 400, limits: smallLimits),
    .init(name: "505 version 2.0", raw: "GET / HTTP/2.0\r\n\r\n", status: 505),
    .init(name: "505 version 1.2", raw: "GET / HTTP/1.2\r\n\r\n", status: 505),
    .init(name: "431 wins over 505", raw: "GET / HTTP/2.0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", status: 431, limits: smallLimits),
    .init(name: "400 smuggling wins over 505", raw: "GET / HTTP/3.0\r\nContent-Length: x\r\n\r\n", status: 400),
    .init(name: "413 early from content-length", raw: "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", status: 413, limits: smallLimits),
    .init(name: "413 from huge content-length", raw: "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999999\r\n\r\n", status: 413),
    .init(name: "413 chunked as soon as the sum exceeds", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n3\r\n", status: 413, limits: smallLimits),
]

@Test(.timeLimit(.minutes(3)), arguments: rejectedCases)
func rejectsWithItsStatus(_ c: RejectedCase) {
    let result = parseAllWays(c.raw, limits: c.limits)
    #expect(status(result) == c.status, "\(c.name): \(result)")
    // Byte by byte: no prefix may answer a different refusal; the first refusal is the final one.
    let parser = HTTPRequestParser(limits: c.limits)
    let bytes = Array(c.raw.utf8)
    for k in 0..<bytes.count {
        let r = parser.parse(Array(bytes[0..<k]))
        if case .invalid(let e) = r {
            #expect(e.status.code == c.status, "\(c.name): prefix \(k) answered \(e)")
            return
        }
        if case .complete = r {
            Issue.record("\(c.name): prefix \(k) complete")
            return
        }
    }
}

@Test(.timeLimit(.minutes(3))) func headReportsFramingKeepAliveAndContinue() throws {
    let parser = HTTPRequestParser()
    let raw = Array("PUT /v1/sessions/s%2D1/feed?a=1&b=x+y&a=%41 HTTP/1.1\r\nCONTENT-length: 10\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n".utf8)
    guard case .complete(let head, let consumed) = parser.parseHead(raw) else {
        Issue.record("head not complete")
        return
    }
    #expect(consumed == raw.count)
    #expect(head.method == .put)
    #expect(head.path == "/v1/sessions/s%2D1/feed")
    #expect(head.pathSegments == ["v1", "sessions", "s-1", "feed"])
    #expect(head.query.values(for: "a") == ["1", "A"])
    #expect(head.query["b"] == "x y")
    #expect(head.bodyFraming == .contentLength(10))
    #expect(head.expectsContinue)
    #expect(!head.keepAlive)
    #expect(head.headers["content-length"] == "10")
    // The body step: not there yet, then complete.
    #expect({ if case .incomplete = parser.parse(raw) { true } else { false } }())
}

@Test(.timeLimit(.minutes(3))) func http10KeepAliveOnlyWhenAsked() {
    let parser = HTTPRequestParser()
    guard case .complete(let plain, _) = parser.parseHead(Array("GET / HTTP/1.0\r\n\r\n".utf8)),
          case .complete(let asked, _) = parser.parseHead(Array("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n".utf8)),
          case .complete(let v11, _) = parser.parseHead(Array("GET / HTTP/1.1\r\n\r\n".utf8))
    else {
        Issue.record("heads not complete")
        return
    }
    #expect(!plain.keepAlive)
    #expect(asked.keepAlive)
    #expect(v11.keepAlive)
    #expect(plain.version == .http1_0)
}

@Test(.timeLimit(.minutes(3))) func pipelinedRequestsConsumeOnlyTheirBytes() {
    let parser = HTTPRequestParser()
    let raw = Array("POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nokGET /b HTTP/1.1\r\n\r\n".utf8)
    guard case .complete(let first, let consumed) = parser.parse(raw) else {
        Issue.record("first not complete")
        return
    }
    #expect(first.body == Array("ok".utf8))
    guard case .complete(let second, let rest) = parser.parse(raw[consumed...]) else {
        Issue.record("second not complete")
        return
    }
    #expect(second.path == "/b")
    #expect(consumed + rest == raw.count)
}

@Test(.timeLimit(.minutes(3))) func neverTrapsOnArbitraryBytes() {
    var rng = SystemRandomNumberGenerator()
    let parser = HTTPRequestParser(limits: smallLimits)
    let alphabet = Array("GET /a?%zZ0 HTTP/1.1\r\n:;,\t\u{0}chunkedTransfer-EncodingContent-Length9fF".utf8) + [0xFF, 0x80]
    for _ in 0..<3000 {
        let n = Int.random(in: 0..<120, using: &rng)
        let bytes = (0..<n).map { _ in alphabet.randomElement(using: &rng) ?? 0 }
        _ = parser.parse(bytes)
        var d = ChunkedBodyDecoder(limits: smallLimits)
        _ = d.decode(bytes[...])
    }
}

/// A well-formed escape of a byte that is not UTF-8 is not an HTTP syntax error (API.md: the segment
/// is then out of form for routing and identifiers); it decodes with U+FFFD so that nothing can match
/// it as ASCII.
@Test(.timeLimit(.minutes(3))) func percentEscapedNonUTF8SegmentDecodesWithReplacement() {
    let raw = Array("GET /v1/sessions/sess-%ff/feed HTTP/1.1\r\n\r\n".utf8)
    guard case .complete(let head, _) = HTTPRequestParser(limits: ParserLimits()).parseHead(raw) else {
        Issue.record("head not complete")
        return
    }
    #expect(head.pathSegments == ["v1", "sessions", "sess-\u{FFFD}", "feed"])
}
