import HTTP

/// What a handler gets: the request, which route matched it, the decoded path parameters and the
/// request id that is echoed on the response and should appear in the handler's own logs.
public struct RequestContext: Sendable {
    public let request: HTTPRequest
    /// The matched pattern, e.g. `/v1/sessions/{session_id}/feed` (the metrics label).
    public let route: String
    /// Named path segments, percent-decoded (`session_id` → `sess-9f2`).
    public let parameters: [String: String]
    /// From `X-Request-Id` when the client sent a valid one, else generated.
    public let requestID: String
    /// The connection's TCP peer (nil when the kernel could not say, or for a request made in
    /// process). Whether it is the client or a proxy in front of it is the product's to decide.
    public let peer: IPAddress?
    /// The request came on a connection beyond its peer's connection cap
    /// (`ServerConfiguration.maxConnectionsPerPeer`): the connection closes after this response,
    /// and the product decides whether to refuse it (`Router.admission`).
    public let overConnectionCap: Bool

    /// A context; the server builds these, tests of handlers may too.
    public init(request: HTTPRequest, route: String, parameters: [String: String], requestID: String, peer: IPAddress? = nil,
                overConnectionCap: Bool = false) {
        self.request = request
        self.route = route
        self.parameters = parameters
        self.requestID = requestID
        self.peer = peer
        self.overConnectionCap = overConnectionCap
    }

    /// The decoded value of the path parameter `name`.
    public func parameter(_ name: String) -> String? { parameters[name] }
}
