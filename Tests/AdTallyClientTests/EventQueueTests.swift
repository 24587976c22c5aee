@testable import AdTallyClient
import Foundation
import Testing

@Suite(.timeLimit(.minutes(3))) struct EventQueueTests {
    static func event(_ n: Int) -> TrackedEvent {
        TrackedEvent(eventID: UUID(), type: .impression, sessionID: "s", adID: "ad-\(n)", snapshotID: nil, position: n,
                     visibility: nil, deviceTimeMilliseconds: 0, correctionMilliseconds: nil)
    }

    func ads(_ events: [TrackedEvent]) -> [String] { events.map(\.adID) }

    /// A full queue drops its oldest waiting event for each new one, and says which.
    @Test func fullQueueDropsTheOldest() throws {
        var queue = EventQueue(capacity: 3)
        var dropped: [TrackedEvent] = []
        for n in 1...5 { dropped += queue.append(Self.event(n), at: .zero, journaled: true).events }
        #expect(ads(dropped) == ["ad-1", "ad-2"])
        #expect(queue.count == 3)
        let cut = queue.cutBatch(maxCount: 10, maxBytes: 1 << 20, correction: nil, durable: false)
        let batch = try #require(cut).batch
        #expect(ads(queue.events(of: batch)) == ["ad-3", "ad-4", "ad-5"])
    }

    /// The oldest batch not in flight goes whole (a batch is never split by a drop); the one in
    /// flight is never dropped, since it may already be counted.
    @Test func fullQueueDropsWholeBatchesButNotTheOneInFlight() {
        var queue = EventQueue(capacity: 4)
        for n in 1...4 { _ = queue.append(Self.event(n), at: .zero, journaled: true) }
        let first = queue.cutBatch(maxCount: 2, maxBytes: 1 << 20, correction: nil, durable: false)!.batch
        let second = queue.cutBatch(maxCount: 2, maxBytes: 1 << 20, correction: nil, durable: false)!.batch
        queue.setPhase(.inFlight, of: first.id)

        let dropped = queue.append(Self.event(5), at: .zero, journaled: true)
        #expect(ads(dropped.events) == ["ad-3", "ad-4"])
        #expect(dropped.records == [.batchClosed(id: second.id)])
        #expect(queue.batches.map(\.id) == [first.id])

        // Nothing left to drop but the batch in flight and the newest: the newest waiting goes.
        _ = queue.append(Self.event(6), at: .zero, journaled: true)
        let next = queue.append(Self.event(7), at: .zero, journaled: true)
        #expect(ads(next.events) == ["ad-5"])
        #expect(queue.batches.map(\.id) == [first.id])
    }

    /// An event dropped before the journal saw it needs no record; one it saw needs a `dropped` record.
    @Test func dropRecordsOnlyForJournaledEvents() {
        var queue = EventQueue(capacity: 2)
        _ = queue.append(Self.event(1), at: .zero, journaled: false)
        _ = queue.append(Self.event(2), at: .zero, journaled: false)
        _ = queue.takeUnjournaled(limit: 1) // event 1 is in the journal's hands now
        #expect(queue.append(Self.event(3), at: .zero, journaled: false).records == [.dropped(sequences: [1])])
        #expect(queue.append(Self.event(4), at: .zero, journaled: false).records == [])
        #expect(queue.firstUnjournaledSequence == 3)
    }

    /// Batches respect the count and the byte bound, and a batch carries the unwritten events the
    /// journal must get with its record.
    @Test func cuttingBatches() {
        var queue = EventQueue(capacity: 100)
        for n in 1...10 { _ = queue.append(Self.event(n), at: .zero, journaled: n <= 3) }
        let (byCount, unwritten) = queue.cutBatch(maxCount: 4, maxBytes: 1 << 20, correction: 5, durable: true)!
        #expect(byCount.sequences == [1, 2, 3, 4])
        #expect(byCount.correction == 5)
        #expect(byCount.phase == .journaling)
        #expect(unwritten.map(\.0) == [4])
        let perEvent = EventEncoder.maximumSize(of: Self.event(5)) + 1
        let bySize = queue.cutBatch(maxCount: 100, maxBytes: EventEncoder.bodyOverhead + 2 * perEvent,
                                    correction: nil, durable: false)!.batch
        #expect(bySize.sequences == [5, 6])
        #expect(queue.firstWaitingSequence == 7)
    }

    /// A 413'd batch becomes its two halves, in its place and in order.
    @Test func splitting() throws {
        var queue = EventQueue(capacity: 100)
        for n in 1...5 { _ = queue.append(Self.event(n), at: .zero, journaled: true) }
        let whole = queue.cutBatch(maxCount: 5, maxBytes: 1 << 20, correction: 9, durable: false)!.batch
        let halves = queue.split(whole.id, durable: true)
        let (first, second) = try #require(halves)
        #expect(first.sequences == [1, 2])
        #expect(second.sequences == [3, 4, 5])
        #expect(first.correction == 9 && second.correction == 9)
        #expect(queue.batches.map(\.id) == [first.id, second.id])
        let single = queue.split(first.id, durable: false).flatMap { queue.split($0.0.id, durable: false) }
        #expect(single == nil, "a batch of one cannot be split")
    }

    @Test func deliveryIsTrackedBySequence() {
        var queue = EventQueue(capacity: 100)
        for n in 1...3 { _ = queue.append(Self.event(n), at: .zero, journaled: true) }
        let batch = queue.cutBatch(maxCount: 2, maxBytes: 1 << 20, correction: nil, durable: false)!.batch
        #expect(!queue.hasDelivered(through: 1))
        _ = queue.close(batch.id)
        #expect(queue.hasDelivered(through: 2))
        #expect(!queue.hasDelivered(through: 3))
    }
}
