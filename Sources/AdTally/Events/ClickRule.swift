import Contract
import Timestamps

/// Rule 4 of the events contract: which clicks are billable. This is the rule's one home: the store
/// locks the session, reads the facts this type asks about, and applies its verdicts one click at a
/// time in request order; no SQL repeats any part of it.
///
/// A click is judged against one snapshot of its session, its *feed*: the snapshot it names when
/// that one was current at the tap (the grace window), else the session's current one. Then, in
/// order: the ad must be in the feed, the named snapshot must be the feed, the named row must be the
/// ad's row in it, and (API 1.3) the ad's impression must have been counted in the session; a click
/// on an ad with an accepted click received within the click window is a duplicate (one tap, one
/// click), and so is a click less than the tap window from the session's last accepted click on
/// another ad (one tap, one click, across ads: the handlers that pile up on a reused cell); a click
/// past the session's limit of accepted clicks in the UTC clock hour is refused (API 1.3).
/// Otherwise it is accepted. The traffic filters come before all of this (`TrafficFilterRule`).
public struct ClickRule: Sendable, Equatable {
    /// `ADTALLY_CLICK_WINDOW_SECONDS`: a click on an ad whose last accepted click was received less
    /// than this long before is a duplicate. 0 turns the window off.
    public var windowSeconds: Int
    /// `ADTALLY_CLICK_GRACE_SECONDS`: how far around its time as the current snapshot a tap may lie
    /// and still be judged against that snapshot. 0 turns the grace off.
    public var graceSeconds: Int
    /// `ADTALLY_TAP_WINDOW_MS`: a click whose `occurred_at` is less than this from that of the
    /// session's last accepted click, on another ad, is a duplicate. 0 turns the rule off.
    public var tapWindowMilliseconds: Int
    /// `ADTALLY_CLICK_NEEDS_IMPRESSION`: a click on an ad whose impression in the session has not
    /// been counted is refused (`no_impression`).
    public var needsImpression: Bool
    /// `ADTALLY_SESSION_CLICK_LIMIT`: at most this many accepted clicks per session in one UTC clock
    /// hour of `received_at`; 0: no limit.
    public var sessionClickLimit: Int

    /// The rule with its settings, which the configuration declares with their defaults.
    public init(windowSeconds: Int, graceSeconds: Int, tapWindowMilliseconds: Int, needsImpression: Bool, sessionClickLimit: Int) {
        self.windowSeconds = windowSeconds
        self.graceSeconds = graceSeconds
        self.tapWindowMilliseconds = tapWindowMilliseconds
        self.needsImpression = needsImpression
        self.sessionClickLimit = sessionClickLimit
    }

    /// A snapshot as the rule needs it: its id and the clicked ad's row in it.
    public struct Feed: Sendable, Equatable {
        public var snapshotID: String
        /// The ad's position in this snapshot; nil when the ad is not in it.
        public var adPosition: Int32?

        public init(snapshotID: String, adPosition: Int32?) {
            self.snapshotID = snapshotID
            self.adPosition = adPosition
        }
    }

    /// The snapshot a click names when it is one of the session's, but not the current one.
    public struct EarlierSnapshot: Sendable, Equatable {
        public var feed: Feed
        public var registeredAt: Timestamp
        /// When the snapshot that replaced it was registered.
        public var replacedAt: Timestamp

        public init(feed: Feed, registeredAt: Timestamp, replacedAt: Timestamp) {
            self.feed = feed
            self.registeredAt = registeredAt
            self.replacedAt = replacedAt
        }
    }

    /// An accepted click, as the tap rule remembers it.
    public struct AcceptedClick: Sendable, Equatable {
        public var adID: String
        public var occurredAt: Timestamp

        public init(adID: String, occurredAt: Timestamp) {
            self.adID = adID
            self.occurredAt = occurredAt
        }
    }

    /// What the database knows that the rule asks about, read under the session's lock.
    public struct Facts: Sendable, Equatable {
        /// The session's current snapshot; nil when the session has none.
        public var current: Feed?
        /// The snapshot the click names, when it is an earlier one of the session's.
        public var named: EarlierSnapshot?
        /// When the last accepted click on this ad in this session was received.
        public var lastAcceptedOnAdReceivedAt: Timestamp?
        /// The session's last accepted click (on any ad): the one accepted last.
        public var lastAcceptedInSession: AcceptedClick?
        /// The ad's impression in this session is counted (`accepted`): stored before, or earlier
        /// in the same request.
        public var impressionCounted: Bool
        /// The session's accepted clicks received in the UTC clock hour of this click's `received_at`.
        public var acceptedClicksThisHour: Int

        public init(current: Feed? = nil, named: EarlierSnapshot? = nil, lastAcceptedOnAdReceivedAt: Timestamp? = nil,
                    lastAcceptedInSession: AcceptedClick? = nil, impressionCounted: Bool = false, acceptedClicksThisHour: Int = 0) {
            self.current = current
            self.named = named
            self.lastAcceptedOnAdReceivedAt = lastAcceptedOnAdReceivedAt
            self.lastAcceptedInSession = lastAcceptedInSession
            self.impressionCounted = impressionCounted
            self.acceptedClicksThisHour = acceptedClicksThisHour
        }
    }

    /// The snapshot `click` is judged against: the earlier snapshot it names when the tap lies in
    /// `[registered_at - G, replaced_at + G)` of it, else the session's current one.
    public func feed(of click: EventInput, _ facts: Facts) -> Feed? {
        if graceSeconds > 0, let named = facts.named, named.feed.snapshotID == click.snapshotID {
            let grace = Int64(graceSeconds) * Timestamp.microsecondsPerSecond
            if named.registeredAt.adding(microseconds: -grace) <= click.occurredAt,
               click.occurredAt < named.replacedAt.adding(microseconds: grace) {
                return named.feed
            }
        }
        return facts.current
    }

    /// The outcome of `click`, received at `receivedAt` (the server's clock, shared by its batch).
    public func judge(_ click: EventInput, _ facts: Facts, receivedAt: Timestamp) -> EventOutcome {
        guard let feed = feed(of: click, facts), let row = feed.adPosition else { return .rejected(.adNotInFeed) }
        if let named = click.snapshotID, named != feed.snapshotID { return .rejected(.staleSnapshot) }
        if let position = click.position, position != row { return .rejected(.positionMismatch) }
        if needsImpression, !facts.impressionCounted { return .rejected(.noImpression) }
        if isWithinClickWindow(lastAcceptedReceivedAt: facts.lastAcceptedOnAdReceivedAt, receivedAt: receivedAt) {
            return .duplicate(.clickWithinWindow)
        }
        if let last = facts.lastAcceptedInSession, last.adID != click.adID, isSimultaneous(click.occurredAt, last.occurredAt) {
            return .duplicate(.simultaneousClick)
        }
        if sessionClickLimit > 0, facts.acceptedClicksThisHour >= sessionClickLimit { return .rejected(.clickLimitExceeded) }
        return .accepted
    }

    /// The start of the UTC clock hour of `instant`: the period the session's click limit counts in.
    public static func clockHour(of instant: Timestamp) -> Timestamp {
        let hour = Int64(3_600) * Timestamp.microsecondsPerSecond
        return Timestamp(microsecondsSinceEpoch: CivilDate.floorDivide(instant.microsecondsSinceEpoch, hour).quotient * hour)
    }

    /// One tap, one click: the ad's last accepted click was received less than the window ago.
    public func isWithinClickWindow(lastAcceptedReceivedAt: Timestamp?, receivedAt: Timestamp) -> Bool {
        guard let last = lastAcceptedReceivedAt else { return false }
        return last > receivedAt.adding(microseconds: -Int64(windowSeconds) * Timestamp.microsecondsPerSecond)
    }

    /// One tap, one click, across ads: two taps less than the tap window apart, by the client's clock.
    public func isSimultaneous(_ occurredAt: Timestamp, _ other: Timestamp) -> Bool {
        let (difference, overflow) = occurredAt.microsecondsSinceEpoch.subtractingReportingOverflow(other.microsecondsSinceEpoch)
        guard !overflow else { return false }
        return difference.magnitude < UInt64(tapWindowMilliseconds) * 1_000
    }
}
