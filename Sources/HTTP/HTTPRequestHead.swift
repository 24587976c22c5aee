/// Everything about a request except its body: what the parser can report as soon as the blank line
/// after the headers arrives, so that the server can route, answer `Expect: 100-continue` and refuse
/// an oversized body before reading it.
public struct HTTPRequestHead: Sendable {
    /// How the body is delimited (RFC 9112 section 6.3).
    public enum BodyFraming: Sendable, Equatable {
        /// No `Content-Length` and no `Transfer-Encoding`: a request without body.
        case none
        /// A body of exactly this many bytes (may exceed the limit; the caller decides when to refuse).
        case contentLength(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
    }

    public let method: HTTPMethod
    /// The request target as sent (origin-form, or absolute-form reduced to its path and query).
    public let target: String
    /// The path part of the target, still percent-encoded (used for logs and exact comparisons).
    public let path: String
    /// The path split on `/` after the leading one, each segment percent-decoded. `/` is `[""]`,
    /// `//healthz` is `["", "healthz"]`: empty segments stay visible so the router can refuse them.
    public let pathSegments: [String]
    /// The raw query string without `?`, nil when the target had no `?`.
    public let rawQuery: String?
    /// The decoded query parameters in order, duplicates kept.
    public let query: QueryParameters
    public let version: HTTPVersion
    public let headers: HTTPHeaders
    public let bodyFraming: BodyFraming
    /// Whether the connection may stay open after the response: 1.1 unless `Connection: close`,
    /// 1.0 only with `Connection: keep-alive`.
    public let keepAlive: Bool
    /// Whether the client sent `Expect: 100-continue` (HTTP/1.1 only) and waits for `100` before
    /// sending its body.
    public let expectsContinue: Bool

    /// A head; the parser is the usual source, tests and tools may build one directly.
    public init(method: HTTPMethod, target: String, path: String, pathSegments: [String], rawQuery: String?,
                query: QueryParameters, version: HTTPVersion, headers: HTTPHeaders, bodyFraming: BodyFraming,
                keepAlive: Bool, expectsContinue: Bool) {
        self.method = method
        self.target = target
        self.path = path
        self.pathSegments = pathSegments
        self.rawQuery = rawQuery
        self.query = query
        self.version = version
        self.headers = headers
        self.bodyFraming = bodyFraming
        self.keepAlive = keepAlive
        self.expectsContinue = expectsContinue
    }

    /// Whether a body will follow the head on the wire.
    public var hasBody: Bool {
        switch bodyFraming {
        case .none, .contentLength(0): false
        default: true
        }
    }
}
