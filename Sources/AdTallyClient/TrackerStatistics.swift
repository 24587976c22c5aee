/// Counts since the tracker started: the aggregate an app team watches ("40% of your clicks are
/// `ad_not_in_feed`") without subscribing to every outcome.
public struct TrackerStatistics: Sendable, Equatable {
    /// One kind of verdict: a type, a status and (for duplicates and rejections) a reason.
    public struct Key: Sendable, Hashable {
        /// The event's type.
        public let type: EventType
        /// The server's status.
        public let status: EventOutcome.Status
        /// The server's reason; nil for `accepted`.
        public let reason: String?

        /// A key of the given parts.
        public init(type: EventType, status: EventOutcome.Status, reason: String?) {
            self.type = type
            self.status = status
            self.reason = reason
        }
    }

    /// Events enqueued by `impression` and `click` since start.
    public internal(set) var tracked = 0
    /// Events found in the journal at start (tracked by an earlier run).
    public internal(set) var restored = 0
    /// Events in the queue now, waiting or in a batch.
    public internal(set) var pending = 0
    /// Events the server answered, by verdict.
    public internal(set) var outcomes: [Key: Int] = [:]
    /// Events dropped because the queue was full.
    public internal(set) var droppedQueueFull = 0
    /// Events dropped because the server refused their batch.
    public internal(set) var droppedRefused = 0
    /// Attempts that failed and were retried.
    public internal(set) var failedAttempts = 0
    /// Journal writes that failed (the disk full or gone); their events were kept in memory.
    public internal(set) var journalFailures = 0
    /// The correction added to the device's clock for `occurred_at`; nil before the server was reached.
    public internal(set) var clockCorrection: Duration?

    /// Statistics with nothing counted.
    public init() {}

    /// Answered events matching every given part (nil matches anything).
    public func count(_ type: EventType? = nil, status: EventOutcome.Status? = nil, reason: String? = nil) -> Int {
        outcomes.reduce(0) { sum, entry in
            let key = entry.key
            guard type.map({ $0 == key.type }) ?? true, status.map({ $0 == key.status }) ?? true,
                  reason.map({ $0 == key.reason }) ?? true else { return sum }
            return sum + entry.value
        }
    }

    /// Events the server answered.
    public var answered: Int { count() }

    /// The share (0 to 1) of answered events of `type` that got `reason`; nil when none was answered.
    public func share(ofReason reason: String, among type: EventType) -> Double? {
        let all = count(type)
        guard all > 0 else { return nil }
        return Double(count(type, reason: reason)) / Double(all)
    }

    /// One line per type and verdict, most frequent first, for a log or a debug screen:
    /// `click rejected ad_not_in_feed: 4 (40.0%)`.
    public var summary: String {
        var lines: [String] = []
        for type in EventType.allCases {
            let all = count(type)
            guard all > 0 else { continue }
            let entries = outcomes.filter { $0.key.type == type }
                .sorted { ($0.value, $1.key.reason ?? "") > ($1.value, $0.key.reason ?? "") }
            for (key, value) in entries {
                let percent = (Double(value) * 1000 / Double(all)).rounded() / 10
                lines.append("\(type.rawValue) \(key.status.rawValue)\(key.reason.map { reason in " \(reason)" } ?? ""): \(value) (\(percent)%)")
            }
        }
        if droppedQueueFull > 0 { lines.append("dropped (queue full): \(droppedQueueFull)") }
        if droppedRefused > 0 { lines.append("dropped (refused by the server): \(droppedRefused)") }
        return lines.joined(separator: "\n")
    }

    mutating func record(_ outcomes: [EventOutcome]) {
        // Runs of the same verdict (the common case: a batch of accepted events) cost one update.
        var index = 0
        while index < outcomes.count {
            let first = outcomes[index]
            var end = index + 1
            while end < outcomes.count, outcomes[end].type == first.type, outcomes[end].status == first.status,
                  outcomes[end].reason == first.reason { end += 1 }
            self.outcomes[Key(type: first.type, status: first.status, reason: first.reason), default: 0] += end - index
            index = end
        }
    }
}
