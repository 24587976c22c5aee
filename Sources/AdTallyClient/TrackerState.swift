import Foundation

/// Everything a tracker knows, behind its one lock. Callers' threads, the journal loop and the
/// sender loop each take the lock briefly to look and to change it; no disk or network call is made
/// while it is held (the journal's methods only enqueue).
struct TrackerState: Sendable {
    struct PersistWaiter: Sendable {
        let target: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    struct FlushWaiter: Sendable {
        let id: Int
        let target: UInt64
        let retrying: Bool
        let continuation: CheckedContinuation<FlushResult, Never>
    }

    /// A journal write under way: the oldest event in it (`UInt64.max` for none).
    struct Write: Sendable {
        let id: Int
        let oldest: UInt64
    }

    var sessionID: String?
    var snapshotID: String?
    var queue: EventQueue
    var statistics = TrackerStatistics()
    var estimator = ClockOffsetEstimator()
    /// The clock probe was answered (even without a `Date` header, after which nothing is corrected).
    var probeAnswered = false
    var stopping = false
    /// After `shutdown()` stopped the sender and read its last answers: the journal loop may stop.
    var senderDone = false
    /// The journal loop has returned: nothing more is handed to the journal.
    var journalStopped = false

    /// Events tracked before the journal was read; they are appended once it is, after its events.
    var loaded = false
    var preload: [(TrackedEvent, Duration)] = []
    var loadWaiters: [CheckedContinuation<Void, Never>] = []

    // Journal.
    /// Records about events leaving the queue, written lazily (losing them only resends a batch).
    var pendingRecords: [JournalRecord] = []
    var pendingRecordsSince: Duration?
    var writes: [Write] = []
    var nextWriteID = 0
    /// The journal loop has a write or a rewrite under way.
    var journalBusy = false
    var journalBytes = 0
    var bytesAfterCompaction = 0
    var compactionWanted = false
    /// After a failed write, the next is tried no sooner than this.
    var journalRetryAt: Duration?
    var persistWaiters: [PersistWaiter] = []

    // Sending.
    /// The body of each batch once encoded, so that every attempt sends the very same bytes.
    var bodies: [UInt64: Data] = [:]
    /// The request the sender waits for, which `shutdown()` abandons.
    var inFlight: RequestInFlight?
    var failures = 0
    var retryAt: Duration?
    var lastFailure = ""
    /// Batches are cut regardless of `maxBatch` and `maxDelay` for events up to here (`flush()`).
    var flushThrough: UInt64 = 0
    var flushWaiters: [FlushWaiter] = []
    var cancelledFlushes = Set<Int>()
    var nextFlushID = 0
    /// Reports for the observer, delivered by the sender loop.
    var notices: [TrackerReport] = []
    /// Events dropped from a full queue since the last delivery of reports: one report for them all.
    var queueFullDrops: [DroppedEvent] = []
    /// False when there is no observer: reports are then not even gathered.
    var reportsWanted = true

    mutating func notify(_ report: TrackerReport) {
        if reportsWanted { notices.append(report) }
    }

    init(capacity: Int) {
        queue = EventQueue(capacity: capacity)
    }

    /// Every event up to here is written (or gone): none waits for the journal or is in a write.
    var durableThrough: UInt64 {
        let oldestPending = min(queue.firstUnjournaledSequence ?? .max, writes.map(\.oldest).min() ?? .max)
        return oldestPending == .max ? queue.lastSequence : oldestPending - 1
    }

    /// Takes the persist waiters that are satisfied now.
    mutating func satisfiedPersistWaiters() -> [PersistWaiter] {
        let through = durableThrough
        let done = persistWaiters.filter { $0.target <= through }
        persistWaiters.removeAll { $0.target <= through }
        return done
    }

    /// Takes the persist waiters that nothing can satisfy any more: the journal loop has stopped
    /// and no write is under way (the events they wait for were never handed over, or their write
    /// failed).
    mutating func strandedPersistWaiters() -> [PersistWaiter] {
        guard journalStopped, writes.isEmpty else { return [] }
        defer { persistWaiters.removeAll() }
        return persistWaiters
    }

    /// Takes the flush waiters whose events have all left the queue.
    mutating func deliveredFlushWaiters() -> [FlushWaiter] {
        let done = flushWaiters.filter { queue.hasDelivered(through: $0.target) }
        flushWaiters.removeAll { queue.hasDelivered(through: $0.target) }
        return done
    }

    /// Queues records for the journal loop's next write; true when they are the first (the loop
    /// must look again, to start their `journalInterval`).
    @discardableResult
    mutating func addPendingRecords(_ records: [JournalRecord], now: Duration) -> Bool {
        guard !records.isEmpty else { return false }
        pendingRecords += records
        guard pendingRecordsSince == nil else { return false }
        pendingRecordsSince = now
        return true
    }

    mutating func registerWrite(oldest: UInt64) -> Int {
        let id = nextWriteID
        nextWriteID += 1
        writes.append(Write(id: id, oldest: oldest))
        return id
    }

    mutating func finishWrite(_ id: Int) {
        writes.removeAll { $0.id == id }
    }
}
