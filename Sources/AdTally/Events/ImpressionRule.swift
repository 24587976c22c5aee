import Contract

/// Rule 3 of the events contract: which impressions are billable. This is the rule's one home:
/// the store reads the facts it asks about and applies the verdict, and the claim that makes
/// "first" hold across processes is the store's (`SessionAdState.claim`), not a second copy of it.
///
/// In order: the ad must have been served to the session (in any snapshot registered for it), an
/// impression that reports visibility must be viewable, and only the first impression of an ad in
/// a session that passes both counts. A rejected impression does not use up the session's one.
public enum ImpressionRule {
    /// The viewable-impression rule: at least half of the ad visible...
    public static let minimumVisibleFraction = 0.5
    /// ...for at least one continuous second.
    public static let minimumVisibleMilliseconds: Int32 = 1_000

    /// Whether an impression passes the viewability rule: one that reports no visibility passes (the
    /// client's word is taken), one that reports it must meet both thresholds.
    public static func isViewable(_ visibility: Visibility?) -> Bool {
        guard let visibility else { return true }
        return visibility.fraction >= minimumVisibleFraction && visibility.milliseconds >= minimumVisibleMilliseconds
    }

    /// What the database knows about the impression's (session, ad) pair.
    public struct Facts: Sendable, Equatable {
        /// The ad is in some snapshot registered for the session.
        public var served: Bool
        /// An impression of the pair was counted already (committed, or earlier in this batch).
        public var counted: Bool

        public init(served: Bool, counted: Bool) {
            self.served = served
            self.counted = counted
        }
    }

    /// The rule's answer: an outcome, or "count it if it is still the first", which the store settles
    /// by claiming the pair under its row lock.
    public enum Verdict: Sendable, Equatable {
        case outcome(EventOutcome)
        case claim
    }

    public static func judge(_ impression: EventInput, _ facts: Facts) -> Verdict {
        guard facts.served else { return .outcome(.rejected(.adNotServed)) }
        guard isViewable(impression.visibility) else { return .outcome(.rejected(.notViewable)) }
        if facts.counted { return .outcome(.duplicate(.impressionAlreadyCounted)) }
        return .claim
    }
}
