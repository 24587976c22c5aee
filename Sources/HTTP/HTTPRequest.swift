/// A complete request: its head and its body bytes (de-chunked).
public struct HTTPRequest: Sendable {
    public let head: HTTPRequestHead
    /// The body as bytes; empty when the request had none.
    public let body: [UInt8]

    /// A request from its parts.
    public init(head: HTTPRequestHead, body: [UInt8]) {
        self.head = head
        self.body = body
    }

    public var method: HTTPMethod { head.method }
    public var target: String { head.target }
    public var path: String { head.path }
    public var pathSegments: [String] { head.pathSegments }
    public var query: QueryParameters { head.query }
    public var version: HTTPVersion { head.version }
    public var headers: HTTPHeaders { head.headers }
    public var keepAlive: Bool { head.keepAlive }
}
