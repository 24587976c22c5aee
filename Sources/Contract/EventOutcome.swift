/// What AdTally decided about one event: the answer's `status` and `reason`, and what the audit
/// row stores. Only `accepted` is billable.
public struct EventOutcome: Sendable, Hashable {
    /// `accepted`, `duplicate` or `rejected`.
    public enum Status: String, Sendable, CaseIterable {
        case accepted, duplicate, rejected
    }

    /// Why an event is not billable; the contract's reason codes, one per rule.
    public enum Reason: String, Sendable, CaseIterable {
        case invalidEvent = "invalid_event"
        case eventIDConflict = "event_id_conflict"
        case adNotServed = "ad_not_served"
        case notViewable = "not_viewable"
        case impressionAlreadyCounted = "impression_already_counted"
        case adNotInFeed = "ad_not_in_feed"
        case staleSnapshot = "stale_snapshot"
        case positionMismatch = "position_mismatch"
        case clickWithinWindow = "click_within_window"
        case simultaneousClick = "simultaneous_click"
        /// A click whose impression in the session was never counted (API 1.3).
        case noImpression = "no_impression"
        /// A click past the session's limit of accepted clicks in one UTC clock hour (API 1.3).
        case clickLimitExceeded = "click_limit_exceeded"
        /// An event of a request whose `User-Agent` matches the bot-agent list (API 1.3).
        case botAgent = "bot_agent"
        /// An event of a request from an address in the blocked-address list (API 1.3).
        case blockedAddress = "blocked_address"
        /// An event of a session erased by `DELETE /v1/sessions/{id}` (API 1.4): stored nowhere,
        /// counted in no report.
        case sessionErased = "session_erased"
    }

    public let status: Status
    public let reason: Reason?

    public init(status: Status, reason: Reason?) {
        self.status = status
        self.reason = reason
    }

    public static let accepted = EventOutcome(status: .accepted, reason: nil)
    public static func rejected(_ reason: Reason) -> EventOutcome { EventOutcome(status: .rejected, reason: reason) }
    public static func duplicate(_ reason: Reason) -> EventOutcome { EventOutcome(status: .duplicate, reason: reason) }
}
