/// The two kinds of event AdTally counts. The raw values are the contract's wire names, so that
/// outcomes and statistics can be keyed by them without a second spelling.
public enum EventType: String, Sendable, Hashable, CaseIterable {
    /// An ad was shown (with visibility fields when a `ViewabilityTracker` measured it).
    case impression
    /// A tap on an ad.
    case click
}
