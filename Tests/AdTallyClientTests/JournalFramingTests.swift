@testable import AdTallyClient
import Foundation
import Testing

@Suite(.timeLimit(.minutes(3))) struct JournalFramingTests {
    static func event(_ n: Int) -> TrackedEvent {
        TrackedEvent(eventID: UUID(), type: n % 2 == 0 ? .impression : .click, sessionID: "sess-\(n)", adID: "ad-\(n)",
                     snapshotID: n % 3 == 0 ? nil : "snap-\(n)", position: n % 4 == 0 ? nil : n,
                     visibility: n % 2 == 0 ? Visibility(fraction: 0.75, milliseconds: 1000 + n) : nil,
                     deviceTimeMilliseconds: 1_796_000_000_000 + Int64(n), correctionMilliseconds: n % 5 == 0 ? nil : -Int64(n))
    }

    static let records: [JournalRecord] = [
        .header(version: 1),
        .event(sequence: 1, event(1)), .event(sequence: 2, event(2)), .event(sequence: 3, event(3)),
        .batch(id: 1, correction: -42, sequences: [1, 2]),
        .batchClosed(id: 1),
        .dropped(sequences: [3, 9, 300]),
        .event(sequence: 4, event(4)),
    ]

    /// Frames of each record, and the file they make.
    static func frames(_ records: [JournalRecord]) -> [[UInt8]] {
        records.map { record in
            var bytes: [UInt8] = []
            JournalFraming.append(record, to: &bytes)
            return bytes
        }
    }

    @Test func everyRecordReadsBack() {
        let scan = JournalFraming.scan(Self.frames(Self.records).flatMap { $0 })
        #expect(scan.records == Self.records)
        #expect(scan.skippedBytes == 0)
    }

    /// A crash in the middle of appending the last record: every earlier record survives.
    @Test(arguments: [1, 5, 9, 20])
    func tornLastRecordLosesOnlyIt(cut: Int) {
        let frames = Self.frames(Self.records)
        var file = frames.flatMap { $0 }
        file.removeLast(min(cut, frames[frames.count - 1].count - 1))
        let scan = JournalFraming.scan(file)
        #expect(scan.records == Array(Self.records.dropLast()))
        #expect(scan.skippedBytes > 0)
    }

    /// A damaged byte inside one record costs that record and no other.
    @Test func damagedRecordLosesOnlyIt() {
        var frames = Self.frames(Self.records)
        frames[2][frames[2].count / 2] ^= 0x5A
        let scan = JournalFraming.scan(frames.flatMap { $0 })
        var expected = Self.records
        expected.remove(at: 2)
        #expect(scan.records == expected)
    }

    /// Garbage before and between records (a file half overwritten) is skipped.
    @Test func garbageIsSkipped() {
        let frames = Self.frames(Self.records)
        let garbage: [UInt8] = [0xA7, 0xFF, 0xFF, 0x00, 0x00, 0x01, 0x02, 0xA7, 0x03, 0x00, 0x00, 0x00, 0x00]
        let scan = JournalFraming.scan(garbage + frames[0] + garbage + frames[1...].flatMap { $0 })
        #expect(scan.records == Self.records)
        #expect(scan.skippedBytes == 2 * garbage.count)
    }

    /// Replaying resolves membership: closed batches and dropped events are gone, a later batch
    /// record takes its events over, and the rest wait in order.
    @Test func contentsResolveTheLog() {
        let e = (1...8).map(Self.event)
        let contents = JournalContents(records: [
            .header(version: 1),
            .batch(id: 2, correction: 7, sequences: [3, 4, 5, 6]),   // before its events: order does not matter
            .event(sequence: 1, e[0]), .event(sequence: 2, e[1]), .event(sequence: 3, e[2]), .event(sequence: 4, e[3]),
            .event(sequence: 5, e[4]), .event(sequence: 6, e[5]), .event(sequence: 7, e[6]), .event(sequence: 8, e[7]),
            .batch(id: 1, correction: nil, sequences: [1, 2]),
            .batchClosed(id: 1),
            .batch(id: 3, correction: 7, sequences: [3, 4]),          // batch 2 split: 3 and 4
            .batch(id: 4, correction: 7, sequences: [5, 6]),
            .dropped(sequences: [7]),
        ])
        #expect(contents.batches == [.init(id: 3, correction: 7, sequences: [3, 4]), .init(id: 4, correction: 7, sequences: [5, 6])])
        #expect(contents.waiting == [8])
        #expect(Set(contents.events.keys) == [3, 4, 5, 6, 8])
        #expect(contents.nextSequence == 9)
        #expect(contents.nextBatchID == 5)
        // Compaction writes records that rebuild the same state.
        #expect(JournalContents(records: contents.records).events == contents.events)
        #expect(JournalContents(records: contents.records).batches == contents.batches)
        #expect(JournalContents(records: contents.records).waiting == contents.waiting)
    }

    @Test func newerFormatIsNotRead() {
        let contents = JournalContents(records: [.header(version: 2), .event(sequence: 1, Self.event(1))])
        #expect(contents.unsupportedVersion == 2)
        #expect(contents.events.isEmpty)
    }
}
