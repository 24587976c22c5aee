import HTTP
import HTTPServer

/// The head checks of API.md's refusal order (failed-auth throttling, auth, then path, then media
/// type), run before the body is read so that they win over `413`.
struct RequestChecks: Sendable {
    /// Every configured token with its scopes (none: every admin request is refused).
    let tokens: AccessTokens
    /// The limits per client; nil for a router used without them (tests of the routes).
    let limits: ClientLimits?

    init(tokens: AccessTokens, limits: ClientLimits? = nil) {
        self.tokens = tokens
        self.limits = limits
    }

    /// An admin endpoint's check, in the contract's order: `429` when the client address earned
    /// too many `401`s this minute; `401` (counted against it) unless `Authorization: Bearer
    /// <token>` names a known token; `403` when that token has none of `scopes`.
    func requireScope(_ scopes: AccessTokens.Scopes, _ context: RequestContext) throws {
        try limits?.checkAuthThrottle(context)
        guard let granted = tokens.scopes(ofAuthorization: context.request.headers["Authorization"]) else {
            limits?.recordAuthFailure(context)
            throw APIError.unauthorized()
        }
        guard !granted.isDisjoint(with: scopes) else { throw APIError.forbidden(scopes) }
    }

    /// `requireScope`'s order for an endpoint that needs every scope (the admin token's): `403`
    /// unless the token has them all.
    func requireEveryScope(_ context: RequestContext) throws {
        try requireScope(.all, context)
        guard let granted = tokens.scopes(ofAuthorization: context.request.headers["Authorization"]), granted.isSuperset(of: .all) else {
            throw APIError.forbidden(.all)
        }
    }

    /// `400 invalid_path` unless the named path parameter is a well-formed identifier.
    func requireIdentifier(_ context: RequestContext, _ name: String) throws -> String {
        guard let value = context.parameter(name), Identifier.isWellFormed(value) else { throw APIError.invalidPath(name) }
        return value
    }

    /// `415` unless the request says `Content-Type: application/json`, with charset utf-8 if any.
    func requireJSON(_ request: HTTPRequest) throws {
        guard let header = request.headers["Content-Type"] else { throw APIError.unsupportedMediaType() }
        let parts = header.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingSpaces().lowercased() }
        guard parts.first == "application/json" else { throw APIError.unsupportedMediaType() }
        for parameter in parts.dropFirst() where !parameter.isEmpty {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
            guard pair.count == 2 else { throw APIError.unsupportedMediaType() }
            if pair[0] == "charset" {
                let value = pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"") && pair[1].count >= 2
                    ? String(pair[1].dropFirst().dropLast()) : pair[1]
                guard value == "utf-8" else { throw APIError.unsupportedMediaType() }
            }
        }
    }
}
