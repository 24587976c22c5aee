/// Whose ads a report may show (API.md section 13): every advertiser's to a publisher's token, one
/// advertiser's to its key. Every report query of the store takes one, as a required argument, so
/// that no endpoint can forget to restrict a key; the route derives it from the request's principal
/// (`init(_:)`), never from the query.
public enum ReportScope: Sendable, Equatable {
    /// A publisher's token: every ad.
    case everyAdvertiser
    /// An advertiser's key: only the ads of this advertiser.
    case advertiser(String)

    /// The scope of `principal`, which the edge resolved for a report route (a token or a key; an
    /// anonymous caller never reaches one, and would see nothing).
    public init(_ principal: Principal) {
        switch principal {
        case .token: self = .everyAdvertiser
        case .advertiser(let key): self = .advertiser(key.advertiserID)
        // A route that asked for a credential never gets .anonymous (Edge.Access): an advertiser
        // no ad can have (identifiers are never empty) shows nothing, should one ever.
        case .anonymous: self = .advertiser("")
        }
    }

    /// Whether an ad of `advertiserID` (nil: an ad never registered) may be shown.
    public func admits(_ advertiserID: String?) -> Bool {
        switch self {
        case .everyAdvertiser: return true
        case .advertiser(let own): return advertiserID == own
        }
    }

    /// The advertiser a listing shows, from its `advertiser_id` parameter (nil: every ad): a key's
    /// own when the parameter is absent; `forbidden` when a key asks for another's.
    public func listingAdvertiser(_ asked: String?) throws(Forbidden) -> String? {
        switch self {
        case .everyAdvertiser: return asked
        case .advertiser(let own):
            if let asked, asked != own { throw Forbidden(advertiserID: asked) }
            return own
        }
    }

    /// A key asked for another advertiser's rows (`403 forbidden`).
    public struct Forbidden: Error, Sendable, Equatable {
        public let advertiserID: String
    }

    /// Whether the caller is an advertiser (its event exports name sessions by `session_ref`).
    public var advertiserID: String? {
        if case .advertiser(let own) = self { return own }
        return nil
    }
}
