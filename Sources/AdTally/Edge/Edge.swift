import Contract
import HTTP
import HTTPServer
import Runtime

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
    let authentication: Authentication

    public init(tokens: AccessTokens, keyring: AdvertiserKeyring = AdvertiserKeyring(), limits: ClientLimits?,
                authCounts: AuthCounts = AuthCounts(), log: LogOutbox? = nil) {
        authentication = Authentication(tokens: tokens, keyring: keyring, limits: limits, counts: authCounts, log: log)
    }

    /// What a route asks of a request before its slice sees it.
    public struct Access: Sendable {
        enum Caller: Sendable {
            /// No credential (public endpoints).
            case anyone
            /// A token with any of `tokens` (every one of them when `every`), or an advertiser key
            /// with `keys` (nil: no key may call; a valid key is `403`).
            case credential(tokens: AccessTokens.Scopes, every: Bool, keys: AdvertiserKey.Scopes?)
        }

        let caller: Caller
        /// Whether a connection over its peer's cap is refused (every route but the probes').
        let limited: Bool
        /// Whether the head takes one event from the client's events bucket (`POST /v1/events`).
        let chargesEvents: Bool
        /// Whether the body must be JSON (`415` otherwise).
        let jsonBody: Bool
        /// A query parameter that an advertiser key may only set to its own advertiser (`403`
        /// otherwise, before the query is read: auth comes before `invalid_query`).
        var keysOwnParameter: String? = nil

        /// `/healthz`, `/readyz`, `/metrics`: public and never limited (API.md section 6).
        public static let probe = Access(caller: .anyone, limited: false, chargesEvents: false, jsonBody: false)
        /// Public, under the connection cap (the dashboard's files).
        public static let open = Access(caller: .anyone, limited: true, chargesEvents: false, jsonBody: false)
        /// The app's events: public, under the connection cap and the events bucket, a JSON body.
        public static let events = Access(caller: .anyone, limited: true, chargesEvents: true, jsonBody: true)

        /// A token with any of `scopes`; an advertiser key is `403`.
        public static func token(_ scopes: AccessTokens.Scopes, jsonBody: Bool = false) -> Access {
            Access(caller: .credential(tokens: scopes, every: false, keys: nil), limited: true, chargesEvents: false, jsonBody: jsonBody)
        }

        /// A token with every scope; an advertiser key is `403`.
        public static func admin(jsonBody: Bool = false) -> Access {
            Access(caller: .credential(tokens: .all, every: true, keys: nil), limited: true, chargesEvents: false, jsonBody: jsonBody)
        }

        /// The reports of ads: a token with the `reports` scope, or an advertiser key with it (the
        /// slice restricts what a key sees to its advertiser's ads).
        public static let reports = Access(caller: .credential(tokens: .reports, every: false, keys: .reports), limited: true,
                                           chargesEvents: false, jsonBody: false)

        /// A listing of ads: as `reports`, and a key may set `advertiser_id` only to its own.
        public static let reportsListing = Access(caller: .credential(tokens: .reports, every: false, keys: .reports), limited: true,
                                                  chargesEvents: false, jsonBody: false, keysOwnParameter: "advertiser_id")

        /// A token with every scope, or an advertiser key with `keys`; `chargesEvents` and
        /// `jsonBody` as for the app's events.
        public static func adminOrKey(_ keys: AdvertiserKey.Scopes, chargesEvents: Bool = false, jsonBody: Bool = false) -> Access {
            Access(caller: .credential(tokens: .all, every: true, keys: keys), limited: true, chargesEvents: chargesEvents, jsonBody: jsonBody)
        }
    }

    /// Adds `method` on `pattern`: requests that pass `access` go to the slice's `accept`, every
    /// `{name}` of the pattern checked as an identifier first.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ access: Access,
                             _ accept: @escaping @Sendable (EdgeRequest) throws -> RouteHandler) {
        let names = Self.parameterNames(pattern)
        let authentication = authentication
        let limits = authentication.limits
        router.add(method, pattern) { context in
            if access.limited { try limits?.admitConnection(context) }
            if access.chargesEvents { try limits?.admitEvents(context) }
            let principal = try authentication.principal(access, context)
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

    /// The credentials a request may present, and what the edge does with them.
    struct Authentication: Sendable {
        let tokens: AccessTokens
        /// The advertiser keys (API.md section 13).
        let keyring: AdvertiserKeyring
        /// The limits per client; nil for a router used without them (tests of a slice).
        let limits: ClientLimits?
        /// `adtally_auth_total`.
        let counts: AuthCounts
        /// Where a refused key is logged (with its `key_id` and advertiser, never the key): the
        /// edge runs on the IO queues, which must not wait for standard output.
        let log: LogOutbox?

        /// Who calls, as `access` requires: `429` when the client address earned too many `401`s this
        /// minute; `401` (counted against it) unless `Authorization: Bearer <credential>` names a known
        /// token or an advertiser key that is not revoked; `403` when that credential may not call.
        func principal(_ access: Access, _ context: RequestContext) throws -> Principal {
            guard case .credential(let needed, let every, let keyScopes) = access.caller else { return .anonymous }
            try limits?.checkAuthThrottle(context)
            let credential = Self.bearerCredential(context.request.headers["Authorization"])
            if let granted = tokens.scopes(ofCredential: credential) {
                guard every ? granted.isSuperset(of: .all) : !granted.isDisjoint(with: needed) else {
                    counts.count(.token, .forbidden)
                    throw APIError.forbidden(every ? .all : needed)
                }
                counts.count(.token, .ok)
                return .token(granted)
            }
            guard let credential, AdvertiserKeyring.looksLikeKey(credential) else {
                counts.count(.token, .unknown)
                limits?.recordAuthFailure(context)
                throw APIError.unauthorized()
            }
            switch keyring.lookup(credential) {
            case .unknown:
                counts.count(.advertiserKey, .unknown)
                limits?.recordAuthFailure(context)
                logRefusal("advertiser key refused: unknown (401)", key: nil, context)
                throw APIError.unauthorized()
            case .revoked(let key):
                counts.count(.advertiserKey, .revoked)
                limits?.recordAuthFailure(context)
                logRefusal("advertiser key refused: revoked (401)", key: key, context)
                throw APIError.unauthorized()
            case .active(let key):
                guard let keyScopes else {
                    counts.count(.advertiserKey, .forbidden)
                    logRefusal("advertiser key refused: not an endpoint for advertiser keys (403)", key: key, context)
                    throw APIError(.forbidden, "An advertiser key may read the reports of its own ads and send conversions; this endpoint needs a publisher's token.")
                }
                guard key.scopes.isSuperset(of: keyScopes) else {
                    counts.count(.advertiserKey, .forbidden)
                    logRefusal("advertiser key refused: scope missing (403)", key: key, context)
                    throw APIError(.forbidden, "This advertiser key does not have the \(keyScopes.names.joined(separator: " and ")) scope this endpoint needs.")
                }
                if let parameter = access.keysOwnParameter {
                    try checkOwnAdvertiser(key, context.request.query.values(for: parameter), context)
                }
                counts.count(.advertiserKey, .ok)
                return .advertiser(key)
            }
        }

        /// `403` when a key asks for another advertiser's rows (any non-empty value other than its own).
        func checkOwnAdvertiser(_ key: AdvertiserKey, _ values: [String], _ context: RequestContext) throws {
            guard let other = values.first(where: { !$0.isEmpty && $0 != key.advertiserID }) else { return }
            counts.count(.advertiserKey, .forbidden)
            logRefusal("advertiser key refused: another advertiser's rows (403)", key: key, context)
            throw APIError(.forbidden, "This advertiser key sees only the ads of advertiser \(key.advertiserID), not those of \(other.prefix(Identifier.maximumLength)).")
        }

        /// The credential of `Authorization: Bearer <credential>` (the scheme in any case); nil when
        /// the header is missing or malformed.
        static func bearerCredential(_ header: String?) -> Substring.UTF8View? {
            guard let header else { return nil }
            let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
            return parts[1].utf8
        }

        /// One warning line for a refused key: its id and advertiser when it is known, the client's
        /// address, the request id; never the key.
        private func logRefusal(_ message: String, key: AdvertiserKey?, _ context: RequestContext) {
            guard let log else { return }
            var fields: [(String, LogValue)] = [("request_id", .string(context.requestID))]
            if let key { fields += [("key_id", .string(key.keyID)), ("advertiser_id", .string(key.advertiserID))] }
            if let client = limits?.client(context) { fields.append(("client", .string(client.description))) }
            log.warning(message, fields)
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
