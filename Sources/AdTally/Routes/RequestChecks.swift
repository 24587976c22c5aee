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

    /// Compares without an early exit, so the time taken does not say how much of a guess was right.
    /// The length difference is folded in rather than returned early; the length itself is not secret.
    static func constantTimeEquals(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt64(given.count ^ expected.count)
        for index in 0..<expected.count {
            let byte = index < given.count ? given[index] : 0
            difference |= UInt64(byte ^ expected[index])
        }
        return difference == 0
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

/// The bearer tokens and their scopes (API.md, "Who calls what"): `ADTALLY_FEED_TOKENS` have the
/// `feed` scope, `ADTALLY_REPORT_TOKENS` the `reports` scope, `ADTALLY_ADMIN_TOKEN` every scope.
/// Each variable may list several tokens, so that a token is rotated without a caller failing: add
/// the new one, move the callers, remove the old one.
struct AccessTokens: Sendable, Equatable {
    /// What a token may do.
    struct Scopes: OptionSet, Sendable, Hashable {
        let rawValue: UInt8
        /// Register and read feeds.
        static let feed = Scopes(rawValue: 1)
        /// Reports, reading feeds, the dashboard's data.
        static let reports = Scopes(rawValue: 2)
        static let all: Scopes = [.feed, .reports]

        /// The scope's name in an answer (`feed`, `reports`, `feed or reports`).
        var names: String {
            [(Scopes.feed, "feed"), (Scopes.reports, "reports")].filter { contains($0.0) }.map(\.1).joined(separator: " or ")
        }
    }

    private struct Known: Sendable, Equatable {
        let bytes: [UInt8]
        let scopes: Scopes
    }

    private let known: [Known]

    init(admin: [String], feed: [String], reports: [String]) {
        known = admin.map { Known(bytes: Array($0.utf8), scopes: .all) }
            + feed.map { Known(bytes: Array($0.utf8), scopes: .feed) }
            + reports.map { Known(bytes: Array($0.utf8), scopes: .reports) }
    }

    /// No token is configured: every admin request is refused.
    var isEmpty: Bool { known.isEmpty }

    /// The scopes of the token in an `Authorization` header (`Bearer <token>`, the scheme in any
    /// case); nil when the header is missing, malformed or names no known token. Every known token
    /// is compared, each in constant time, so the time taken says nothing of which one came close.
    func scopes(ofAuthorization header: String?) -> Scopes? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let presented = Array(parts[1].utf8)
        var matched = false
        var scopes: UInt8 = 0
        for token in known {
            let equal = RequestChecks.constantTimeEquals(presented, token.bytes)
            // Every token is looked at, whichever matched.
            scopes |= equal ? token.scopes.rawValue : 0
            matched = matched || equal
        }
        return matched ? Scopes(rawValue: scopes) : nil
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    func trimmingSpaces() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars = scalars.dropFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
