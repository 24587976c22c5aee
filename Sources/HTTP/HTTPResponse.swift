/// A response as a handler returns it. The server adds the framing headers (`Content-Length` or
/// `Transfer-Encoding`), `Date`, `Connection` and `X-Request-Id`; handlers set only what is theirs.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    /// Headers of the handler's choosing. Framing headers set here are ignored: the server frames.
    public var headers: HTTPHeaders
    public var body: HTTPResponseBody
    /// The contract's error code when this is an error answer (`not_found`), so that the access
    /// log can name it without parsing the body; never sent on the wire.
    public var errorCode: String?
    /// What the handler tells the server's observer of this answer once it is sent (AdTally: the
    /// events' outcomes, for `/metrics`), so that counting follows the answer instead of being a
    /// step of the handler's; never sent on the wire.
    public var observation: (any Sendable)?

    /// A response with a full body (or none).
    public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = .bytes(body)
    }

    /// A response whose body the server streams with `Transfer-Encoding: chunked` while `produce`
    /// runs on the handler's thread. `produce` writes through the writer (which blocks while the
    /// client is behind and throws once the client is gone); the body ends when `produce` returns.
    /// An HTTP/1.0 client, which knows no chunked coding, gets the same bytes as they come, the body
    /// delimited by the connection's close (no `Content-Length`, `Connection: close`).
    public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders(),
                streaming produce: @escaping @Sendable (any HTTPBodyWriter) throws -> Void) {
        self.status = status
        self.headers = headers
        self.body = .stream(produce)
    }

    /// A JSON response from already-encoded UTF-8 JSON text, with `Content-Type: application/json`.
    public static func json(_ status: HTTPStatus, _ text: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        json(status, Array(text.utf8), headers: headers)
    }

    /// A JSON response from already-encoded UTF-8 JSON bytes (what `JSONEncoder` produces).
    public static func json(_ status: HTTPStatus, _ bytes: [UInt8], headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var h = headers
        h.replaceOrAdd(name: "Content-Type", value: "application/json")
        return HTTPResponse(status: status, headers: h, body: bytes)
    }

    /// A plain-text response (`text/plain; charset=utf-8`), e.g. for metrics.
    public static func text(_ status: HTTPStatus, _ text: String, contentType: String = "text/plain; charset=utf-8",
                            headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var h = headers
        h.replaceOrAdd(name: "Content-Type", value: contentType)
        return HTTPResponse(status: status, headers: h, body: Array(text.utf8))
    }
}

/// A response body: all bytes at once, or produced piecemeal by the handler.
public enum HTTPResponseBody: Sendable {
    /// The whole body, sent with `Content-Length`.
    case bytes([UInt8])
    /// A body produced through a writer, sent chunked (see `HTTPResponse.init(status:headers:streaming:)`).
    case stream(@Sendable (any HTTPBodyWriter) throws -> Void)
}

/// Where a streamed body's bytes go. `write` may block (backpressure) and throws when the client went
/// away, so a producer stops its work (a database cursor) instead of filling memory for nobody.
public protocol HTTPBodyWriter {
    /// Sends these bytes as the next part of the body. An empty array is ignored.
    func write(_ bytes: [UInt8]) throws
    /// As `write`, but gives up (throwing `HTTPBodyWriterDeadline`) once `deadline` passes while the
    /// client is behind: a producer holding a resource for the body (a database transaction) ends
    /// it then, whatever the client does.
    func write(_ bytes: [UInt8], before deadline: ContinuousClock.Instant) throws
}

/// Thrown by `HTTPBodyWriter.write(_:before:)` when its deadline passed.
public struct HTTPBodyWriterDeadline: Error, Sendable {
    public init() {}
}

extension HTTPBodyWriter {
    /// A writer that cannot wait on a client (one that collects the body) checks the deadline only.
    public func write(_ bytes: [UInt8], before deadline: ContinuousClock.Instant) throws {
        guard ContinuousClock.now < deadline else { throw HTTPBodyWriterDeadline() }
        try write(bytes)
    }

    /// Sends the UTF-8 of a string.
    public func write(_ string: String) throws { try write(Array(string.utf8)) }
}
