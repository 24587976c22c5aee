import Contract

/// Why a request's traffic was filtered.
public enum TrafficFilterVerdict: Sendable, Hashable {
    /// Its `User-Agent` contains a pattern of `ADTALLY_BOT_AGENTS_FILE`.
    case botAgent
    /// Its client address is in a range of `ADTALLY_BLOCKED_ADDRESSES_FILE`.
    case blockedAddress

    var reason: EventOutcome.Reason {
        switch self {
        case .botAgent: .botAgent
        case .blockedAddress: .blockedAddress
        }
    }
}
