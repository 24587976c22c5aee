import HTTP

/// A handler: synchronous and throwing. Where it runs is its route's choice (`RouteHandler`): on
/// the IO queue when it is quick, on a worker thread when it may block (it calls libpq).
public typealias HTTPHandler = @Sendable (RequestContext) throws -> HTTPResponse

/// A handler that answers later: it starts the work, hands `HTTPResponder` to whatever finishes it
/// and returns, so that no thread waits for the answer (a request waiting for a group commit, say).
/// It must not block and should be quick. Throwing answers the error, as for `HTTPHandler`.
public typealias HTTPDeferredHandler = @Sendable (RequestContext, HTTPResponder) throws -> Void

/// How an endpoint answers, as one choice: a route has exactly one of these, so no combination of
/// flags can describe a handler that is both quick and blocking, or deferred and waited for.
public enum RouteHandler: Sendable {
    /// Quick and never blocking (`/healthz`, `/metrics`): runs on the IO queue, saving two thread
    /// hops. A streamed body from it is still produced on a worker thread.
    case inline(HTTPHandler)
    /// May block (it calls libpq): runs on a worker thread, never on an IO queue.
    case onWorker(HTTPHandler)
    /// Answers later through its `HTTPResponder` (`HTTPDeferredHandler`): runs on the IO queue when
    /// the body is small (`Router.inlineDeferredBodyLimit`), on a worker thread otherwise.
    case deferred(HTTPDeferredHandler)
}

/// What an endpoint does with a request whose head it matched, before the body is read and before
/// `100 Continue`: it checks the head (throwing the answer that refuses it, so that `401`, `400`,
/// `415` win over `413` and a refused upload is never read) and returns the handler that answers
/// the request once its body is read, holding whatever it read from the head (the parsed query,
/// the caller's identity) so that nothing is parsed twice. It runs on an IO queue: it must be quick
/// and must not block. The context's request has an empty body.
public typealias RouteAcceptor = @Sendable (RequestContext) throws -> RouteHandler

/// Method and path-pattern routing. Patterns are literal segments and `{name}` segments; an empty
/// request segment (`//healthz`, `/healthz/`) matches nothing. Segments are compared percent-decoded.
///
/// Every `GET` route also answers `HEAD` (RFC 9110, 9.1) with the `GET` handler: the server sends
/// that answer's status and headers, `Content-Length` included, without the body. It is done here
/// once rather than per route, so no route can forget it and `Allow` always lists it.
public struct Router: Sendable {
    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    struct Route: Sendable {
        let pattern: String
        let segments: [Segment]
        var endpoints: [HTTPMethod: RouteAcceptor]
        var literalCount: Int { segments.count { if case .literal = $0 { true } else { false } } }
    }

    /// A request's route: the pattern that matched, the path parameters, and what accepts it.
    public struct RouteMatch: Sendable {
        public let pattern: String
        public let parameters: [String: String]
        let accept: RouteAcceptor
    }

    /// The outcome of routing a request.
    public enum Match: Sendable {
        /// A route and method matched.
        case found(RouteMatch)
        /// The path matched, the method did not: `405` with these methods in `Allow` (sorted).
        case methodNotAllowed(pattern: String, allowed: [String])
        /// No pattern matched the path: `404`.
        case notFound
    }

    private var routes: [Route] = []

    /// How error answers are written: the server's own (`404`, `405`, parse errors, timeouts, `503`)
    /// and those of handlers that throw. The product gives its format (AdTally: API.md's JSON body).
    public let errorBody: ErrorBody

    /// The largest body (bytes) with which a deferred handler runs on the IO queue; larger bodies
    /// take it to a worker thread, so that decoding them does not hold up the queue's other
    /// connections. A batch of 50 events (about 15 KB) decodes in about 0.2 ms on this project's
    /// 2-core benchmark machine.
    public static let inlineDeferredBodyLimit = 32 * 1024

    /// An empty router whose error answers are written in `errorBody`.
    public init(errorBody: ErrorBody = .plainText) { self.errorBody = errorBody }

    /// Adds the endpoint `method` on `pattern` (`/v1/reports/ads/{ad_id}`): `accept` checks each
    /// request's head and says how it is answered. Adding the same method and pattern again
    /// replaces it.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ accept: @escaping RouteAcceptor) {
        let segments = Self.parse(pattern)
        if let i = routes.firstIndex(where: { $0.segments == segments }) {
            routes[i].endpoints[method] = accept
        } else {
            routes.append(Route(pattern: pattern, segments: segments, endpoints: [method: accept]))
            // Most literal segments first, so `/a/b` wins over `/a/{x}`; stable otherwise.
            routes = routes.enumerated().sorted { ($0.element.literalCount, -$0.offset) > ($1.element.literalCount, -$1.offset) }.map(\.element)
        }
    }

    /// Adds an endpoint that checks nothing in the head: every request is answered by `handler`.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: RouteHandler) {
        add(method, pattern) { _ in handler }
    }

    /// Every method and pattern served (`HEAD` wherever there is `GET`), sorted, so that
    /// documentation (the OpenAPI file) can be checked against what is really served.
    public var routeTable: [(method: String, pattern: String)] {
        routes.flatMap { route in Self.methods(of: route).map { (method: $0, pattern: route.pattern) } }
            .sorted { ($0.pattern, $0.method) < ($1.pattern, $1.method) }
    }

    /// The methods a route answers, as `Allow` lists them: its own, plus `HEAD` where it has `GET`.
    private static func methods(of route: Route) -> [String] {
        var methods = Set(route.endpoints.keys.map(\.rawValue))
        if methods.contains(HTTPMethod.get.rawValue) { methods.insert(HTTPMethod.head.rawValue) }
        return methods.sorted()
    }

    /// The endpoint that answers `method` on `route`: `HEAD` falls back to `GET`.
    private static func endpoint(_ method: HTTPMethod, of route: Route) -> RouteAcceptor? {
        if let endpoint = route.endpoints[method] { return endpoint }
        return method == .head ? route.endpoints[.get] : nil
    }

    /// Routes a method and decoded path segments (`HTTPRequestHead.pathSegments`).
    public func match(_ method: HTTPMethod, _ pathSegments: [String]) -> Match {
        var methodMismatch: (String, [String])?
        for route in routes {
            guard let parameters = Self.bind(route.segments, pathSegments) else { continue }
            if let endpoint = Self.endpoint(method, of: route) {
                return .found(RouteMatch(pattern: route.pattern, parameters: parameters, accept: endpoint))
            }
            if methodMismatch == nil {
                methodMismatch = (route.pattern, Self.methods(of: route))
            }
        }
        if let (pattern, allowed) = methodMismatch { return .methodNotAllowed(pattern: pattern, allowed: allowed) }
        return .notFound
    }

    private static func bind(_ pattern: [Segment], _ path: [String]) -> [String: String]? {
        guard pattern.count == path.count else { return nil }
        var parameters: [String: String] = [:]
        for (segment, value) in zip(pattern, path) {
            switch segment {
            case .literal(let literal):
                guard literal == value else { return nil }
            case .parameter(let name):
                guard !value.isEmpty else { return nil }
                parameters[name] = value
            }
        }
        // Only the root pattern `/` has an empty segment; elsewhere an empty segment matches nothing.
        if path.count > 1, path.contains("") { return nil }
        return parameters
    }

    static func parse(_ pattern: String) -> [Segment] {
        pattern.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { raw in
            let s = String(decoding: raw, as: UTF8.self)
            if s.hasPrefix("{"), s.hasSuffix("}"), s.count > 2 { return .parameter(String(s.dropFirst().dropLast())) }
            return .literal(s)
        }
    }
}
