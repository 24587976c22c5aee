import Contract
import Timestamps

/// One event that passed rule 1 (well-formed) of section 2: every later rule works on this.
public struct EventInput: Sendable, Hashable {
    /// The farthest in the past `occurred_at` may lie: 7 days before the server's clock.
    public static let maximumAgeMicroseconds: Int64 = 7 * 86_400 * 1_000_000
    /// The farthest in the future `occurred_at` may lie (client clock skew): 10 minutes.
    public static let maximumLeadMicroseconds: Int64 = 10 * 60 * 1_000_000
    /// The largest `visible_ms`: one day.
    public static let maximumVisibleMilliseconds: Int64 = 86_400_000

    /// The canonical UUID text, lowercase.
    public let eventID: String
    public let type: EventType
    public let sessionID: String
    public let adID: String
    /// The client's clock, within `[now - 7 days, now + 10 minutes]` of the server's when decoded.
    public let occurredAt: Timestamp
    /// The feed the client drew the ad from, when it said.
    public let snapshotID: String?
    /// The row the client drew the ad at, when it said.
    public let position: Int32?
    /// Only for impressions that sent both visibility fields; always `nil` for clicks.
    public let visibility: Visibility?
    /// The traffic filters' verdict on the request the event came in (nil: let through), which the
    /// route gives and `TrafficFilterRule` applies.
    public var trafficFilter: TrafficFilterVerdict?

    public init(eventID: String, type: EventType, sessionID: String, adID: String, occurredAt: Timestamp,
                snapshotID: String? = nil, position: Int32? = nil, visibility: Visibility? = nil, trafficFilter: TrafficFilterVerdict? = nil) {
        self.eventID = eventID
        self.type = type
        self.sessionID = sessionID
        self.adID = adID
        self.occurredAt = occurredAt
        self.snapshotID = snapshotID
        self.position = position
        self.visibility = visibility
        self.trafficFilter = trafficFilter
    }
}
