import Contract
import HTTP
import HTTPServer

/// The thin edge between the HTTP server and the feature slices. For every route it applies, in
/// the contract's order of refusals, what the route's `Access` asks: the connection cap and the
/// events bucket (`429`), the caller's credential resolved into a `Principal` (`429` for an address
/// that failed too often, `401`, `403`), the path's identifiers (`400 invalid_path`) and the media
/// type of a JSON body (`415`); then it hands the request to the slice (`EdgeRequest`), whose
/// `accept` reads the rest of the head (a query) and says how the request is answered. Errors are
/// `APIError`s, written by `ErrorBody.api`; a database that cannot be used is `503` there.
///
/// A route with a JSON body reads no query (none of the contract's does), so its media type is
/// checked before the slice's own checks without breaking the order of `invalid_query` and `415`.
public struct Edge: Sendable {
    /// The routes, for the HTTP server.
    public private(set) var router = Router(errorBody: .api)
    let tokens: AccessTokens
    /// The limits per client; nil for a router used without them (tests of a slice).
    let limits: ClientLimits?

    public init(tokens: AccessTokens, limits: ClientLimits?) {
        self.tokens = tokens
        self.limits = limits
    }

    /// What a route asks of a request before its slice sees it.
    public struct Access: Sendable {
        enum Caller: Sendable {
            /// No credential (public endpoints).
            case anyone
            /// A token with any of these scopes.
            case anyScope(AccessTokens.Scopes)
            /// A token with every scope (the admin's).
            case everyScope
        }

        let caller: Caller
        /// Whether a connection over its peer's cap is refused (every route but the probes').
        let limited: Bool
        /// Whether the head takes one event from the client's events bucket (`POST /v1/events`).
        let chargesEvents: Bool
        /// Whether the body must be JSON (`415` otherwise).
        let jsonBody: Bool

        /// `/healthz`, `/readyz`, `/metrics`: public and never limited (API.md section 6).
        public static let probe = Access(caller: .anyone, limited: false, chargesEvents: false, jsonBody: false)
        /// Public, under the connection cap (the dashboard's files).
        public static let open = Access(caller: .anyone, limited: true, chargesEvents: false, jsonBody: false)
        /// The app's events: public, under the connection cap and the events bucket, a JSON body.
        public static let events = Access(caller: .anyone, limited: true, chargesEvents: true, jsonBody: true)

        /// A token with any of `scopes`.
        public static func token(_ scopes: AccessTokens.Scopes, jsonBody: Bool = false) -> Access {
            Access(caller: .anyScope(scopes), limited: true, chargesEvents: false, jsonBody: jsonBody)
        }

        /// A token with every scope.
        public static func admin(jsonBody: Bool = false) -> Access {
            Access(caller: .everyScope, limited: true, chargesEvents: false, jsonBody: jsonBody)
        }
    }

    /// Adds `method` on `pattern`: requests that pass `access` go to the slice's `accept`, every
    /// `{name}` of the pattern checked as an identifier first.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ access: Access,
                             _ accept: @escaping @Sendable (EdgeRequest) throws -> RouteHandler) {
        let names = Self.parameterNames(pattern)
        let tokens = tokens, limits = limits
        router.add(method, pattern) { context in
            if access.limited { try limits?.admitConnection(context) }
            if access.chargesEvents { try limits?.admitEvents(context) }
            let principal = try Self.principal(access.caller, context, tokens: tokens, limits: limits)
            var path: [String: String] = [:]
            for name in names {
                guard let value = context.parameter(name), Identifier.isWellFormed(value) else { throw APIError.invalidPath(name) }
                path[name] = value
            }
            if access.jsonBody, !MediaType.isJSON(contentType: context.request.headers["Content-Type"]) {
                throw APIError.unsupportedMediaType()
            }
            return try accept(EdgeRequest(principal: principal, path: path, context: context))
        }
    }

    /// Who calls, as `caller` requires: `429` when the client address earned too many `401`s this
    /// minute; `401` (counted against it) unless `Authorization: Bearer <token>` names a known
    /// token; `403` when that token lacks the scopes.
    static func principal(_ caller: Access.Caller, _ context: RequestContext, tokens: AccessTokens,
                          limits: ClientLimits?) throws -> Principal {
        let needed: AccessTokens.Scopes
        switch caller {
        case .anyone: return .anonymous
        case .anyScope(let scopes): needed = scopes
        case .everyScope: needed = .all
        }
        try limits?.checkAuthThrottle(context)
        guard let granted = tokens.scopes(ofAuthorization: context.request.headers["Authorization"]) else {
            limits?.recordAuthFailure(context)
            throw APIError.unauthorized()
        }
        switch caller {
        case .everyScope where !granted.isSuperset(of: .all):
            throw APIError.forbidden(.all)
        case .anyScope where granted.isDisjoint(with: needed):
            throw APIError.forbidden(needed)
        default:
            return .token(granted)
        }
    }

    /// The `{name}` segments of a pattern, in order.
    static func parameterNames(_ pattern: String) -> [String] {
        pattern.split(separator: "/").compactMap { segment in
            segment.hasPrefix("{") && segment.hasSuffix("}") && segment.count > 2 ? String(segment.dropFirst().dropLast()) : nil
        }
    }
}

/// A request's head as the edge hands it to a slice: who calls and the path's identifiers, checked.
public struct EdgeRequest: Sendable {
    public let principal: Principal
    /// The path's `{name}` parameters, each a well-formed identifier.
    public let path: [String: String]
    public let context: RequestContext
}
