@testable import AdTallyClient
import Foundation
import Testing

/// The journal through the tracker, on real files in a temporary directory.
@Suite(.timeLimit(.minutes(5))) struct TrackerJournalTests {
    static func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("adtally-client-\(UUID().uuidString)")
    }

    static func journalFile(_ directory: URL) -> URL { directory.appendingPathComponent("events.journal") }

    /// Tracks `count` impressions, waits for the journal, and shuts the tracker down without sending.
    static func journal(_ count: Int, in directory: URL) async throws -> [UUID] {
        let fixture = try TrackerFixture(storage: .directory(directory)) { $0.maxDelay = .seconds(3600) }
        let ids = try (1...count).map { try fixture.tracker.impression(adID: "ad-\($0)", position: $0) }
        try await fixture.tracker.persist()
        await fixture.shutdown()
        return ids
    }

    /// Starts a tracker on `directory`, flushes its one batch (all accepted) and returns the ids sent.
    static func deliver(from directory: URL) async throws -> (ids: [String], fixture: TrackerFixture) {
        let fixture = try TrackerFixture(storage: .directory(directory))
        let flush = Task { await fixture.tracker.flush() }
        let ids = try ServerAnswers.eventIDs(in: try await fixture.acceptNext())
        #expect(await flush.value == .delivered)
        return (ids, fixture)
    }

    /// A `429` (the server's limits per client) or a `503` never drops a batch: it is retried, and
    /// it stays in the journal, so a tracker started again on that journal sends the same events.
    @Test func aBatchRefusedByTheLimitsStaysInTheJournal() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fixture = try TrackerFixture(storage: .directory(directory))
        let ids = try (1...3).map { (n: Int) in try fixture.tracker.impression(adID: "ad-\(n)", position: n) }
        let flush = Task { await fixture.tracker.flush() }
        try await fixture.transport.next().answer(ServerAnswers.error(429, "rate_limited", headers: ["Retry-After": "30"]))
        guard case .willRetry(let after, let reason) = await flush.value else {
            Issue.record("a 429 was not taken for a failure to retry")
            return
        }
        #expect(after >= .seconds(30) && reason == "429 rate_limited")
        // The tracker sends it again itself once the wait is over (here: a 503, then nothing).
        fixture.clock.advance(by: after)
        try await fixture.transport.next().answer(ServerAnswers.error(503, "unavailable", headers: ["Retry-After": "1"]))
        #expect(fixture.reports.dropped.isEmpty, "a refused batch was dropped: \(fixture.reports.dropped)")
        #expect(fixture.tracker.statistics.pending == 3)
        await fixture.shutdown()
        let (sent, again) = try await Self.deliver(from: directory)
        #expect(sent == ids.map { $0.uuidString.lowercased() })
        await again.shutdown()
    }

    /// Events written before a restart are sent after it.
    @Test func eventsSurviveARestart() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ids = try await Self.journal(3, in: directory)
        let (sent, fixture) = try await Self.deliver(from: directory)
        #expect(sent == ids.map { $0.uuidString.lowercased() })
        #expect(fixture.reports.all.first == .restored(events: 3, batches: 0, lostBytes: 0))
        await fixture.shutdown()
        // Delivered before this shutdown: nothing comes back a third time.
        let third = try TrackerFixture(storage: .directory(directory))
        await third.tracker.waitUntilLoaded()
        #expect(third.tracker.statistics.pending == 0)
        await third.shutdown()
    }

    /// A crash tore the last record: the others are sent, and the file is whole again afterwards.
    @Test func tornLastRecordLosesOnlyThatEvent() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ids = try await Self.journal(3, in: directory)
        let file = Self.journalFile(directory)
        let bytes = try Data(contentsOf: file)
        try bytes.prefix(bytes.count - 7).write(to: file)

        let (sent, fixture) = try await Self.deliver(from: directory)
        #expect(sent == ids.prefix(2).map { $0.uuidString.lowercased() })
        guard case let .restored(events, _, lostBytes) = fixture.reports.all.first else {
            Issue.record("no restored report: \(fixture.reports.all)")
            return
        }
        #expect(events == 2)
        #expect(lostBytes > 0)
        await fixture.shutdown()
        #expect(JournalFraming.scan(Array(try Data(contentsOf: file))).skippedBytes == 0, "the torn tail was compacted away")
    }

    /// A damaged byte in the middle costs one event; the ones after it are sent.
    @Test func damagedMiddleRecordLosesOnlyThatEvent() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ids = try await Self.journal(3, in: directory)
        let file = Self.journalFile(directory)
        var bytes = Array(try Data(contentsOf: file))
        let frames = JournalFraming.scan(bytes).records
        #expect(frames.count == 4, "a header and three events: \(frames)")
        // The second event's frame starts after the header's and the first event's.
        var prefix: [UInt8] = []
        for record in frames.prefix(2) { JournalFraming.append(record, to: &prefix) }
        bytes[prefix.count + 20] ^= 0xFF
        try Data(bytes).write(to: file)

        let (sent, fixture) = try await Self.deliver(from: directory)
        #expect(sent == [ids[0], ids[2]].map { $0.uuidString.lowercased() })
        await fixture.shutdown()
    }

    /// An empty directory, or an empty journal file, is a start with nothing to send.
    @Test func restartWithAnEmptyDirectory() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for round in 0..<2 {
            if round == 1 { try Data().write(to: Self.journalFile(directory)) }
            let fixture = try TrackerFixture(storage: .directory(directory))
            #expect(await fixture.tracker.flush() == .delivered)
            #expect(fixture.tracker.statistics.restored == 0)
            #expect(fixture.transport.sent.isEmpty)
            #expect(fixture.reports.all.isEmpty)
            await fixture.shutdown()
        }
    }

    /// A batch cut before a restart is resent after it byte for byte, before anything newer.
    @Test func restartResendsTheSameBatch() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = try TrackerFixture(storage: .directory(directory)) { $0.maxBatch = 2 }
        try (1...3).forEach { _ = try before.tracker.impression(adID: "ad-\($0)") }
        let lost = try await before.transport.next()
        lost.answer(.failure("connection reset"))
        await before.shutdown()

        let after = try TrackerFixture(storage: .directory(directory)) { $0.maxBatch = 2 }
        try after.tracker.impression(adID: "ad-new")
        let flush = Task { await after.tracker.flush() }
        let resent = try await after.acceptNext()
        let rest = try await after.acceptNext()
        #expect(await flush.value == .delivered)
        #expect(resent == lost.request)
        #expect(try ServerAnswers.events(in: rest).map { $0["ad_id"] as? String } == ["ad-3", "ad-new"])
        await after.shutdown()
    }

    /// Two trackers on one directory would resend each other's batches: the second is refused.
    @Test func oneTrackerPerDirectory() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try TrackerFixture(storage: .directory(directory))
        #expect(throws: TrackerError.journalInUse(directory.path)) {
            _ = try TrackerFixture(storage: .directory(directory))
        }
        await first.shutdown()
        let again = try TrackerFixture(storage: .directory(directory))
        await again.shutdown()
    }

    /// Delivered events are compacted away: the file does not grow with what was sent.
    @Test func compactionKeepsTheFileSmall() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fixture = try TrackerFixture(storage: .directory(directory)) { $0.maxBatch = 500 }
        let long = String(repeating: "x", count: 120) // about 180 bytes a record
        for round in 0..<6 {
            for n in 0..<500 { try fixture.tracker.impression(adID: "\(long)-\(round)-\(n)") }
            try await fixture.acceptNext()
            #expect(await fixture.tracker.flush() == .delivered)
            try await fixture.tracker.persist()
        }
        await fixture.shutdown()
        let size = try FileManager.default.attributesOfItem(atPath: Self.journalFile(directory).path)[.size] as? Int ?? -1
        // 3,000 records take about 540 KB; compaction keeps the file near its 256 KiB floor, plus
        // what was written since the last compaction (a round, about 90 KB).
        #expect(size >= 0 && size < AdTallyTracker.compactionFloor + 128 * 1024, "\(size) bytes")
    }
}
