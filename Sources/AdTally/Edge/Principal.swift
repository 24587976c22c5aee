/// Who is calling, resolved once at the edge from the request's `Authorization` header and handed
/// to the slice with the request (`EdgeRequest`), so that no slice reads a credential itself.
public enum Principal: Sendable, Equatable {
    /// A public endpoint asked for no credential.
    case anonymous
    /// A publisher's bearer token, with its scopes (`ADTALLY_ADMIN_TOKEN` has them all).
    case token(AccessTokens.Scopes)
    /// An advertiser's key (API.md section 13): it sees only its advertiser's ads.
    case advertiser(AdvertiserKey)
}

/// An advertiser key as the edge resolved it: which key, whose, and what it may do. The secret is
/// not here: once its digest matched, nothing needs it.
public struct AdvertiserKey: Sendable, Equatable {
    /// What a key may do (API.md section 13).
    public struct Scopes: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// The reports of its own ads, and the dashboard's data.
        public static let reports = Scopes(rawValue: 1)
        /// `POST /v1/conversions` of clicks on its own ads.
        public static let conversions = Scopes(rawValue: 2)
        public static let all: Scopes = [.reports, .conversions]

        /// The scopes' names, sorted, as the API writes them.
        public var names: [String] {
            [(Scopes.conversions, "conversions"), (Scopes.reports, "reports")].filter { contains($0.0) }.map(\.1)
        }

        /// The scopes of `names` (`reports`, `conversions`); nil for an unknown name.
        public init?(names: [String]) {
            var scopes: Scopes = []
            for name in names {
                switch name {
                case "reports": scopes.insert(.reports)
                case "conversions": scopes.insert(.conversions)
                default: return nil
                }
            }
            self = scopes
        }
    }

    public let keyID: String
    public let advertiserID: String
    public let scopes: Scopes

    public init(keyID: String, advertiserID: String, scopes: Scopes) {
        self.keyID = keyID
        self.advertiserID = advertiserID
        self.scopes = scopes
    }
}
