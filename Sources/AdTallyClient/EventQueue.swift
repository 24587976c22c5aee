/// The tracker's undelivered events in the order they were tracked, the batches cut from its head,
/// and its bound. A pure value: the tracker keeps it behind its lock and does every disk and network
/// step outside, so this is where the queue's rules live and can be tested directly.
///
/// Invariants: every batch's events are older than every waiting event (batches are cut from the
/// head); events not yet handed to the journal are the newest waiting ones.
struct EventQueue: Sendable {
    struct Entry: Sendable {
        var event: TrackedEvent
        /// When it was tracked (or restored), on the tracker's monotonic clock: `maxDelay` counts from it.
        var enqueuedAt: Duration
    }

    /// What `append` dropped to stay within the bound.
    struct Dropped: Sendable {
        var events: [TrackedEvent] = []
        /// Records that tell the journal those events are gone (none for events it never saw).
        var records: [JournalRecord] = []
        var isEmpty: Bool { events.isEmpty }
    }

    let capacity: Int
    private(set) var entries: [UInt64: Entry] = [:]
    private(set) var waiting = FIFO<UInt64>()
    private(set) var batches: [QueuedBatch] = []
    private(set) var unjournaled = FIFO<UInt64>()
    private(set) var nextSequence: UInt64 = 1
    private(set) var nextBatchID: UInt64 = 1

    init(capacity: Int) {
        self.capacity = capacity
        entries.reserveCapacity(min(capacity, 1024))
    }

    /// Events in the queue, batched or not.
    var count: Int { entries.count }
    /// The sequence number of the newest event ever appended (0: none).
    var lastSequence: UInt64 { nextSequence - 1 }
    /// The oldest event still in the queue.
    var oldestSequence: UInt64? {
        let oldestBatched = batches.compactMap(\.sequences.first).min()
        switch (oldestBatched, waiting.first) {
        case let (batched?, waiting?): return min(batched, waiting)
        case let (batched, waiting): return batched ?? waiting
        }
    }
    /// Whether every event up to `sequence` has left the queue.
    func hasDelivered(through sequence: UInt64) -> Bool {
        oldestSequence.map { $0 > sequence } ?? true
    }
    /// When the oldest waiting event was tracked.
    var oldestWaitingSince: Duration? { waiting.first.flatMap { entries[$0]?.enqueuedAt } }
    var waitingCount: Int { waiting.count }
    var firstWaitingSequence: UInt64? { waiting.first }
    var firstUnjournaledSince: Duration? { unjournaled.first.flatMap { entries[$0]?.enqueuedAt } }
    var firstUnjournaledSequence: UInt64? { unjournaled.first }

    /// Adds an event at the tail; when the queue is full, first drops the oldest events: the oldest
    /// batch not in flight, whole (a batch is never split), or else the oldest waiting event.
    mutating func append(_ event: TrackedEvent, at time: Duration, journaled: Bool) -> Dropped {
        var dropped = Dropped()
        if entries.count >= capacity { dropOldest(into: &dropped) }
        let sequence = nextSequence
        nextSequence += 1
        entries[sequence] = Entry(event: event, enqueuedAt: time)
        waiting.append(sequence)
        if !journaled { unjournaled.append(sequence) }
        return dropped
    }

    private mutating func dropOldest(into dropped: inout Dropped) {
        if let index = batches.firstIndex(where: { $0.phase != .inFlight && $0.phase != .answered }) {
            let batch = batches.remove(at: index)
            dropped.events += batch.sequences.compactMap { entries.removeValue(forKey: $0)?.event }
            dropped.records.append(.batchClosed(id: batch.id))
        } else if let sequence = waiting.popFirst() {
            if unjournaled.first == sequence {
                _ = unjournaled.popFirst() // never written, so nothing to tell the journal
            } else {
                dropped.records.append(.dropped(sequences: [sequence]))
            }
            if let entry = entries.removeValue(forKey: sequence) { dropped.events.append(entry.event) }
        }
    }

    /// Hands up to `limit` events to the journal, oldest first.
    mutating func takeUnjournaled(limit: Int) -> [(UInt64, TrackedEvent)] {
        var taken: [(UInt64, TrackedEvent)] = []
        while taken.count < limit, let sequence = unjournaled.popFirst() {
            if let entry = entries[sequence] { taken.append((sequence, entry.event)) }
        }
        return taken
    }

    /// A failed journal write gives its events back (those still in the queue), to be written again.
    mutating func returnUnjournaled(_ sequences: [UInt64]) {
        unjournaled.prepend(sequences.filter { entries[$0] != nil })
    }

    /// Cuts a batch from the head of the waiting events: up to `maxCount` events whose body stays
    /// within `maxBytes` (at least one event). Returns the batch and those of its events the journal
    /// has not been handed yet (they must be written with the batch's record).
    mutating func cutBatch(maxCount: Int, maxBytes: Int, correction: Int64?, durable: Bool)
        -> (batch: QueuedBatch, unjournaled: [(UInt64, TrackedEvent)])?
    {
        var sequences: [UInt64] = []
        var unwritten: [(UInt64, TrackedEvent)] = []
        var size = EventEncoder.bodyOverhead
        while sequences.count < maxCount, let sequence = waiting.first {
            guard let entry = entries[sequence] else { _ = waiting.popFirst(); continue }
            let eventSize = EventEncoder.maximumSize(of: entry.event) + 1
            if !sequences.isEmpty, size + eventSize > maxBytes { break }
            size += eventSize
            sequences.append(sequence)
            _ = waiting.popFirst()
            if unjournaled.first == sequence {
                _ = unjournaled.popFirst()
                unwritten.append((sequence, entry.event))
            }
        }
        guard !sequences.isEmpty else { return nil }
        let batch = QueuedBatch(id: nextBatchID, sequences: sequences, correction: correction,
                                phase: durable ? .journaling : .ready)
        nextBatchID += 1
        batches.append(batch)
        return (batch, unwritten)
    }

    func batch(_ id: UInt64) -> QueuedBatch? { batches.first { $0.id == id } }

    /// The first batch that may be sent now.
    var nextReadyBatch: QueuedBatch? { batches.first { $0.phase == .ready } }
    var hasBatchInFlight: Bool { batches.contains { $0.phase == .inFlight } }
    /// Batches cut but not sent yet: the tracker prepares at most one ahead of the one in flight.
    var batchesNotInFlight: Int { batches.count { $0.phase == .journaling || $0.phase == .ready } }

    mutating func setPhase(_ phase: QueuedBatch.Phase, of id: UInt64) {
        if let index = batches.firstIndex(where: { $0.id == id }) { batches[index].phase = phase }
    }

    func events(of batch: QueuedBatch) -> [TrackedEvent] {
        batch.sequences.compactMap { entries[$0]?.event }
    }

    /// Removes a batch and its events (answered, or refused); nil when it is gone already (dropped
    /// while its request was being answered cannot happen, but a caller need not rely on it).
    mutating func close(_ id: UInt64) -> [TrackedEvent]? {
        guard let index = batches.firstIndex(where: { $0.id == id }) else { return nil }
        let batch = batches.remove(at: index)
        return batch.sequences.compactMap { entries.removeValue(forKey: $0)?.event }
    }

    /// Replaces a batch by its two halves, in its place (the server answered `413`); nil for a batch
    /// of one event, which cannot be split.
    mutating func split(_ id: UInt64, durable: Bool) -> (QueuedBatch, QueuedBatch)? {
        guard let index = batches.firstIndex(where: { $0.id == id }), batches[index].sequences.count > 1 else {
            return nil
        }
        let old = batches[index]
        let middle = old.sequences.count / 2
        let phase: QueuedBatch.Phase = durable ? .journaling : .ready
        let first = QueuedBatch(id: nextBatchID, sequences: Array(old.sequences[..<middle]),
                                correction: old.correction, phase: phase)
        let second = QueuedBatch(id: nextBatchID + 1, sequences: Array(old.sequences[middle...]),
                                 correction: old.correction, phase: phase)
        nextBatchID += 2
        batches.replaceSubrange(index...index, with: [first, second])
        return (first, second)
    }

    /// Takes over what a journal held at start (before anything else was appended). Restored events
    /// count as tracked at `time`, and restored batches are ready to send first.
    mutating func restore(_ contents: JournalContents, at time: Duration) {
        for (sequence, event) in contents.events { entries[sequence] = Entry(event: event, enqueuedAt: time) }
        batches = contents.batches.map {
            QueuedBatch(id: $0.id, sequences: $0.sequences, correction: $0.correction, phase: .ready)
        }
        waiting = FIFO(contents.waiting)
        nextSequence = max(nextSequence, contents.nextSequence)
        nextBatchID = max(nextBatchID, contents.nextBatchID)
    }

    /// Everything the journal has been handed that is still in the queue, for compaction: the same
    /// state in a fresh file. Events not handed yet are written after it, as usual.
    func journaledContents() -> JournalContents {
        var contents = JournalContents()
        let firstUnhanded = unjournaled.first ?? nextSequence
        for (sequence, entry) in entries where sequence < firstUnhanded {
            contents.events[sequence] = entry.event
        }
        contents.batches = batches.map { .init(id: $0.id, correction: $0.correction, sequences: $0.sequences) }
        contents.waiting = waiting.elements.filter { $0 < firstUnhanded }
        contents.nextSequence = nextSequence
        contents.nextBatchID = nextBatchID
        return contents
    }
}
