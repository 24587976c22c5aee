/// An RFC 9112 request parser as a pure function over bytes, after picohttpparser and swift-nio's
/// `HTTPDecoder`: it keeps no state between calls, never reads past the bytes it is given, and never
/// traps, whatever the input. The connection owns the buffer; it calls `parseHead` until the head is
/// complete, decides (route, `100 Continue`, early `413`), then feeds the rest to a body step.
///
/// When several refusals apply, bytes are examined in order and the first problem met wins, except
/// that too many header fields (`431`) and an unsupported version (`505`) are only reported once the
/// whole head has been checked for syntax and smuggling (`400`), as API.md orders them. A target over
/// its limit is reported (`414`) as soon as it passes the limit, before the head size (`431`).
/// `Host` is not required: AdTally serves one origin and its own tests speak raw HTTP.
public struct HTTPRequestParser: Sendable {
    /// The limits enforced.
    public let limits: ParserLimits

    /// A parser with the given limits.
    public init(limits: ParserLimits = ParserLimits()) { self.limits = limits }

    /// Parses a whole request (head and body). `413` is answered from `Content-Length` before any
    /// body byte is needed, and for chunked bodies as soon as the sizes add up past the limit.
    public func parse(_ bytes: [UInt8]) -> RequestParseResult {
        parse(bytes[...])
    }

    /// As `parse(_:)`, over a slice.
    public func parse(_ bytes: ArraySlice<UInt8>) -> RequestParseResult {
        switch parseHead(bytes) {
        case .incomplete: return .incomplete
        case .invalid(let e): return .invalid(e)
        case .complete(let head, let headLength):
            if let e = checkBodySize(head) { return .invalid(e) }
            let rest = bytes.dropFirst(headLength)
            switch parseBody(head, rest) {
            case .incomplete: return .incomplete
            case .invalid(let e): return .invalid(e)
            case .complete(let body, let bodyLength):
                return .complete(HTTPRequest(head: head, body: body), consumed: headLength + bodyLength)
            }
        }
    }

    /// `413` when the head announces a `Content-Length` over the limit, else nil.
    public func checkBodySize(_ head: HTTPRequestHead) -> HTTPParseError? {
        if case .contentLength(let n) = head.bodyFraming, n > limits.maxBodyBytes {
            return HTTPParseError(.payloadTooLarge, "Content-Length \(n) over \(limits.maxBodyBytes)")
        }
        return nil
    }

    /// Parses the body that follows `head`, from the first byte after the head. Stateless: chunked
    /// bodies are decoded from the start on every call (use a `ChunkedBodyDecoder` to resume instead).
    public func parseBody(_ head: HTTPRequestHead, _ bytes: ArraySlice<UInt8>) -> BodyParseResult {
        switch head.bodyFraming {
        case .none:
            return .complete([], consumed: 0)
        case .contentLength(let n):
            if n > limits.maxBodyBytes {
                return .invalid(HTTPParseError(.payloadTooLarge, "Content-Length \(n) over \(limits.maxBodyBytes)"))
            }
            guard bytes.count >= n else { return .incomplete }
            return .complete(Array(bytes.prefix(n)), consumed: n)
        case .chunked:
            var decoder = ChunkedBodyDecoder(limits: limits)
            return decoder.decode(bytes)
        }
    }

    /// Parses a request head (request line and header fields up to the blank line).
    public func parseHead(_ bytes: [UInt8]) -> HeadParseResult { parseHead(bytes[...]) }

    /// As `parseHead(_:)`, over a slice.
    public func parseHead(_ bytes: ArraySlice<UInt8>) -> HeadParseResult {
        bytes.withUnsafeBufferPointer { parseHead(buffer: $0) }
    }

    // MARK: - The head

    private func parseHead(buffer b: UnsafeBufferPointer<UInt8>) -> HeadParseResult {
        let n = b.count
        var i = 0
        // Not enough bytes yet: fine unless the head is already over its size limit.
        func needMore() -> HeadParseResult {
            n > limits.maxHeadBytes
                ? .invalid(HTTPParseError(.headersTooLarge, "request head over \(limits.maxHeadBytes) bytes"))
                : .incomplete
        }
        func bad(_ reason: String) -> HeadParseResult { .invalid(HTTPParseError(.badRequest, reason)) }

        // RFC 9112 2.2: a server SHOULD ignore empty lines received before the request line.
        while i < n, b[i] == CR {
            guard i + 1 < n else { return needMore() }
            guard b[i + 1] == LF else { return bad("bare CR before request line") }
            i += 2
        }
        guard i < n else { return needMore() }

        // method SP
        let methodStart = i
        while i < n, ByteClass.isToken(b[i]) { i += 1 }
        guard i < n else { return needMore() }
        guard b[i] == SP, i > methodStart else { return bad("malformed request line (method)") }
        let methodEnd = i
        i += 1

        // request-target SP
        let targetStart = i
        while i < n, ByteClass.isVisible(b[i]) {
            i += 1
            if i - targetStart > limits.maxTargetBytes {
                return .invalid(HTTPParseError(.uriTooLong, "request target over \(limits.maxTargetBytes) bytes"))
            }
        }
        guard i < n else { return needMore() }
        guard b[i] == SP, i > targetStart else { return bad("malformed request line (target)") }
        let targetEnd = i
        i += 1

        // HTTP-version CRLF: exactly "HTTP/" DIGIT "." DIGIT; other shapes are syntax errors (400),
        // well-formed versions other than 1.0 and 1.1 are 505 once the head is checked.
        var digits = (0, 0)
        for k in 0..<10 {
            guard i < n else { return needMore() }
            let c = b[i]
            if k == 5 || k == 7 {
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return bad("malformed HTTP version") }
                if k == 5 { digits.0 = Int(c - UInt8(ascii: "0")) } else { digits.1 = Int(c - UInt8(ascii: "0")) }
            } else if c != Self.versionPattern[k] {
                return bad("malformed request line (version)")
            }
            i += 1
        }
        let version = HTTPVersion(major: digits.0, minor: digits.1)

        // field-line CRLF ... CRLF
        var fields: [(name: String, value: String)] = []
        var fieldCount = 0
        var headEnd = 0
        while true {
            guard i < n else { return needMore() }
            let c = b[i]
            if c == CR {
                guard i + 1 < n else { return needMore() }
                guard b[i + 1] == LF else { return bad("bare CR in head") }
                i += 2
                headEnd = i
                break
            }
            if c == SP || c == HTAB { return bad("obsolete line folding or whitespace before a field line") }
            let nameStart = i
            while i < n, ByteClass.isToken(b[i]) { i += 1 }
            guard i < n else { return needMore() }
            if b[i] != COLON {
                if b[i] == SP || b[i] == HTAB { return bad("whitespace between field name and colon") }
                return bad("invalid character in field name")
            }
            guard i > nameStart else { return bad("empty field name") }
            let nameEnd = i
            i += 1
            while i < n, b[i] == SP || b[i] == HTAB { i += 1 }
            let valueStart = i
            while i < n, b[i] != CR {
                guard ByteClass.isFieldValue(b[i]) else {
                    return bad(b[i] == LF ? "bare LF in field value" : b[i] == 0 ? "NUL in field value" : "control character in field value")
                }
                i += 1
            }
            guard i + 1 < n else { return needMore() }
            guard b[i + 1] == LF else { return bad("bare CR in field value") }
            var valueEnd = i
            while valueEnd > valueStart, b[valueEnd - 1] == SP || b[valueEnd - 1] == HTAB { valueEnd -= 1 }
            i += 2
            fieldCount += 1
            if fieldCount <= limits.maxHeaderCount {
                fields.append((name: string(b, nameStart, nameEnd), value: string(b, valueStart, valueEnd)))
            }
        }

        let headers = HTTPHeaders(parsed: fields)
        let method = HTTPMethod(rawValue: string(b, methodStart, methodEnd))
        let target = string(b, targetStart, targetEnd)

        // Target: origin-form, or absolute-form reduced to path and query.
        guard let (path, rawQuery) = Self.splitTarget(target) else { return bad("unsupported request-target form") }
        guard let segments = Self.decodePath(path) else { return bad("malformed percent-encoding in path") }
        let query: QueryParameters
        if let rawQuery {
            guard let q = QueryParameters(decoding: Substring(rawQuery)) else { return bad("malformed percent-encoding in query") }
            query = q
        } else {
            query = QueryParameters()
        }

        // Body framing and smuggling shapes (RFC 9112 6.1 to 6.3).
        let framing: HTTPRequestHead.BodyFraming
        switch Self.bodyFraming(headers, version: version) {
        case .failure(let e): return .invalid(e)
        case .success(let f): framing = f
        }

        if fieldCount > limits.maxHeaderCount {
            return .invalid(HTTPParseError(.headersTooLarge, "more than \(limits.maxHeaderCount) header fields"))
        }
        if headEnd > limits.maxHeadBytes {
            return .invalid(HTTPParseError(.headersTooLarge, "request head over \(limits.maxHeadBytes) bytes"))
        }
        guard version == .http1_0 || version == .http1_1 else {
            return .invalid(HTTPParseError(.versionNotSupported, "version \(version) not supported"))
        }

        let keepAlive: Bool
        if !headers.contains("Connection") {
            keepAlive = version == .http1_1  // the common case, without splitting any value
        } else if headers.containsToken("close", in: "Connection") {
            keepAlive = false
        } else if version == .http1_1 {
            keepAlive = true
        } else {
            keepAlive = headers.containsToken("keep-alive", in: "Connection")
        }
        let expectsContinue = version == .http1_1
            && (headers["Expect"].map { $0.equalsIgnoringASCIICase("100-continue") } ?? false)

        let head = HTTPRequestHead(method: method, target: target, path: path, pathSegments: segments,
                                   rawQuery: rawQuery, query: query, version: version, headers: headers,
                                   bodyFraming: framing, keepAlive: keepAlive, expectsContinue: expectsContinue)
        return .complete(head, consumed: headEnd)
    }

    /// `HTTP/` DIGIT `.` DIGIT CRLF; the digit positions (5 and 7) are checked separately.
    private static let versionPattern: [UInt8] = Array("HTTP/0.0\r\n".utf8)

    private func string(_ b: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: b[from..<to]), as: UTF8.self)
    }

    /// Splits a target into path and raw query. Absolute-form (`http://host/p?q`) must be accepted by
    /// servers (RFC 9112 3.2.2); its authority is ignored. Other forms (`*`, authority-form) are refused.
    static func splitTarget(_ target: String) -> (String, String?)? {
        var rest = Substring(target)
        if !rest.hasPrefix("/") {
            let lower = rest.prefix(8).lowercased()
            let schemeLength: Int
            if lower.hasPrefix("http://") { schemeLength = 7 } else if lower.hasPrefix("https://") { schemeLength = 8 } else { return nil }
            let afterScheme = rest.dropFirst(schemeLength)
            guard let slash = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return ("/", nil) }
            rest = afterScheme[slash...]
            if rest.hasPrefix("?") { rest = "/" + rest }
        }
        guard let q = rest.firstIndex(of: "?") else { return (String(rest), nil) }
        return (String(rest[..<q]), String(rest[rest.index(after: q)...]))
    }

    /// Splits a path after its leading `/` and percent-decodes each segment; nil on malformed
    /// encoding or invalid UTF-8 (see `PercentDecoding.decodePathSegment`).
    static func decodePath(_ path: String) -> [String]? {
        var segments: [String] = []
        for raw in path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            guard let s = PercentDecoding.decodePathSegment(raw) else { return nil }
            segments.append(s)
        }
        return segments
    }

    /// Decides the body framing, refusing the smuggling shapes: `Content-Length` with
    /// `Transfer-Encoding`, an invalid or repeated-and-different `Content-Length`, a transfer coding
    /// other than a single `chunked`, and `Transfer-Encoding` in HTTP/1.0 (RFC 9112 6.1: such a
    /// message is faulty).
    static func bodyFraming(_ headers: HTTPHeaders, version: HTTPVersion) -> Result<HTTPRequestHead.BodyFraming, HTTPParseError> {
        func bad(_ reason: String) -> Result<HTTPRequestHead.BodyFraming, HTTPParseError> {
            .failure(HTTPParseError(.badRequest, reason))
        }
        // The common shapes first, without building lists: no framing field, or one Content-Length
        // of plain digits (the general rules below give the same answer for them).
        var lengthFields = 0, codingFields = 0
        var onlyLength: String?
        for field in headers.fields {
            if field.name.equalsIgnoringASCIICase("Content-Length") {
                lengthFields += 1
                onlyLength = field.value
            } else if field.name.equalsIgnoringASCIICase("Transfer-Encoding") {
                codingFields += 1
            }
        }
        if lengthFields == 0, codingFields == 0 { return .success(.none) }
        if lengthFields == 1, codingFields == 0, let text = onlyLength, (1...18).contains(text.utf8.count),
           text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let value = Int(text) {
            return .success(.contentLength(value))
        }
        let lengths = headers.values(for: "Content-Length")
        let codings = headers.values(for: "Transfer-Encoding")
        if !codings.isEmpty {
            guard lengths.isEmpty else { return bad("both Content-Length and Transfer-Encoding") }
            guard version == .http1_1 else { return bad("Transfer-Encoding in HTTP/1.0") }
            let elements = codings.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map { $0.trimmingOWS() }
            guard elements.count == 1, elements[0].equalsIgnoringASCIICase("chunked") else {
                return bad("transfer coding other than chunked")
            }
            return .success(.chunked)
        }
        guard !lengths.isEmpty else { return .success(.none) }
        // Every element of every Content-Length field must be digits and all must agree
        // (RFC 9110 8.6 allows `5, 5`). Compared as digit strings so huge values cannot overflow.
        var canonical: Substring?
        for element in lengths.flatMap({ $0.split(separator: ",", omittingEmptySubsequences: false) }) {
            let trimmed = element.trimmingOWS()
            guard !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                return bad("invalid Content-Length")
            }
            var digits = trimmed.drop { $0 == "0" }
            if digits.isEmpty { digits = "0" }
            if let c = canonical, c != digits { return bad("repeated Content-Length with different values") }
            canonical = digits
        }
        guard let digits = canonical else { return bad("invalid Content-Length") }
        // More than 18 digits cannot fit any body limit: saturate instead of overflowing.
        let value = digits.utf8.count > 18 ? Int.max : (Int(digits) ?? Int.max)
        return .success(.contentLength(value))
    }
}

let CR: UInt8 = 0x0D
let LF: UInt8 = 0x0A
let SP: UInt8 = 0x20
let HTAB: UInt8 = 0x09
let COLON: UInt8 = 0x3A
