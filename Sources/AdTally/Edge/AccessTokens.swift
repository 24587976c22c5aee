/// The bearer tokens and their scopes (API.md, "Who calls what"): `ADTALLY_FEED_TOKENS` have the
/// `feed` scope, `ADTALLY_REPORT_TOKENS` the `reports` scope, `ADTALLY_ADMIN_TOKEN` every scope.
/// Each variable may list several tokens, so that a token is rotated without a caller failing: add
/// the new one, move the callers, remove the old one.
public struct AccessTokens: Sendable, Equatable {
    /// What a token may do.
    public struct Scopes: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// Register and read feeds.
        public static let feed = Scopes(rawValue: 1)
        /// Reports, reading feeds, the dashboard's data.
        public static let reports = Scopes(rawValue: 2)
        public static let all: Scopes = [.feed, .reports]

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

    public init(admin: [String], feed: [String], reports: [String]) {
        known = admin.map { Known(bytes: Array($0.utf8), scopes: .all) }
            + feed.map { Known(bytes: Array($0.utf8), scopes: .feed) }
            + reports.map { Known(bytes: Array($0.utf8), scopes: .reports) }
    }

    /// No token is configured: every admin request is refused.
    public var isEmpty: Bool { known.isEmpty }

    /// The scopes of the token `credential` (of `Authorization: Bearer <credential>`); nil when
    /// it is missing or names no known token. Every known token is compared, each in constant
    /// time, so the time taken says nothing of which one came close.
    func scopes(ofCredential credential: Substring.UTF8View?) -> Scopes? {
        guard let credential else { return nil }
        let presented = Array(credential)
        var matched = false
        var scopes: UInt8 = 0
        for token in known {
            let equal = Self.constantTimeEquals(presented, token.bytes)
            // Every token is looked at, whichever matched.
            scopes |= equal ? token.scopes.rawValue : 0
            matched = matched || equal
        }
        return matched ? Scopes(rawValue: scopes) : nil
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
}
