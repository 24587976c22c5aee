import Foundation

/// The server's verdict on one event, matched to the event by its place in the batch. An app team
/// reads these (or `TrackerStatistics`) to see its own bugs: a share of clicks `rejected` as
/// `ad_not_in_feed` is a stale-row bug in the app, not the server's doing.
public struct EventOutcome: Sendable, Hashable {
    /// The contract's three statuses.
    public enum Status: String, Sendable, Hashable, CaseIterable {
        /// Billable.
        case accepted
        /// Stored but not billed: already counted (the reason says by which rule).
        case duplicate
        /// Stored (unless malformed) but not billed: the reason says which rule refused it.
        case rejected
    }

    /// The event's id, as `impression`/`click` returned it.
    public let eventID: UUID
    /// The event's type, so that outcomes can be counted per type without the app keeping its events.
    public let type: EventType
    /// The session it was reported for.
    public let sessionID: String
    /// The ad it was about.
    public let adID: String
    /// The verdict: only `accepted` is billed.
    public let status: Status
    /// Why it was a duplicate or rejected (`impression_already_counted`, `ad_not_in_feed`, ...).
    public let reason: String?
    /// For `invalid_event`, the first bad field.
    public let field: String?
    /// For `invalid_event`, the server's sentence about it.
    public let message: String?

    /// An outcome of the given parts (tests and custom transports build them).
    public init(eventID: UUID, type: EventType, sessionID: String, adID: String, status: Status,
                reason: String? = nil, field: String? = nil, message: String? = nil) {
        self.eventID = eventID
        self.type = type
        self.sessionID = sessionID
        self.adID = adID
        self.status = status
        self.reason = reason
        self.field = field
        self.message = message
    }
}
