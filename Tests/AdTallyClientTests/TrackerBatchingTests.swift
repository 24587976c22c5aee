@testable import AdTallyClient
import Foundation
import Testing

@Suite(.timeLimit(.minutes(5))) struct TrackerBatchingTests {
    /// `maxBatch` events send a batch at once; fewer wait for `maxDelay`, then go.
    @Test func batchesGoAtMaxBatchOrAfterMaxDelay() async throws {
        let fixture = try TrackerFixture { $0.maxBatch = 3; $0.maxDelay = .seconds(10) }
        for n in 1...3 { try fixture.tracker.impression(adID: "ad-\(n)") }
        let full = try await fixture.acceptNext()
        #expect(try ServerAnswers.eventIDs(in: full).count == 3)
        #expect(fixture.clock.uptime() == .zero)

        fixture.clock.advance(by: .seconds(2))
        try fixture.tracker.impression(adID: "ad-4")
        #expect(try await fixture.clock.nextSleeper() == .seconds(12), "the lone event waits maxDelay from its call")
        fixture.clock.advance(by: .milliseconds(9999))
        #expect(fixture.transport.sent.filter { $0.path == "/v1/events" }.count == 1)
        fixture.clock.advance(by: .milliseconds(1))
        let late = try await fixture.transport.next()
        #expect(late.sentAt == .seconds(12))
        #expect(try ServerAnswers.eventIDs(in: late.request).count == 1)
        late.answer(try ServerAnswers.answered(late.request))
        #expect(await fixture.tracker.flush() == .delivered)
        await fixture.shutdown()
    }

    /// One request in flight: while the first batch waits for its answer, the next batch is ready
    /// but not sent.
    @Test func oneRequestInFlight() async throws {
        let fixture = try TrackerFixture { $0.maxBatch = 2 }
        for n in 1...6 { try fixture.tracker.impression(adID: "ad-\(n)") }
        let first = try await fixture.transport.next()
        let flush = Task { await fixture.tracker.flush() }
        // The sender could only send a second request now, and must not: answer the first and only
        // then expect the second.
        #expect(fixture.transport.waitingCount == 0)
        first.answer(try ServerAnswers.answered(first.request))
        let second = try await fixture.transport.next()
        #expect(fixture.transport.waitingCount == 0)
        second.answer(try ServerAnswers.answered(second.request))
        try await fixture.acceptNext()
        #expect(await flush.value == .delivered)
        #expect(fixture.transport.sent.filter { $0.path == "/v1/events" }.count == 3)
        await fixture.shutdown()
    }

    /// Events go out in the order they were tracked, cut into batches of `maxBatch`.
    @Test func orderIsKept() async throws {
        let fixture = try TrackerFixture { $0.maxBatch = 4 }
        let ids = try (1...10).map { try fixture.tracker.impression(adID: "ad-\($0)") }
        let flush = Task { await fixture.tracker.flush() }
        var sent: [String] = []
        for _ in 0..<3 { sent += try ServerAnswers.eventIDs(in: try await fixture.acceptNext()) }
        #expect(await flush.value == .delivered)
        #expect(sent == ids.map { $0.uuidString.lowercased() })
        await fixture.shutdown()
    }

    /// Mistakes the server would refuse as `invalid_event` are refused at the call.
    @Test func callsAreChecked() async throws {
        let fixture = try TrackerFixture()
        #expect(throws: TrackingError.invalidIdentifier(field: "ad_id", value: "ad 1")) { try fixture.tracker.impression(adID: "ad 1") }
        #expect(throws: TrackingError.invalidPosition(-1)) { try fixture.tracker.click(adID: "a", position: -1) }
        let bad = Visibility(fraction: 1.5, milliseconds: 10)
        #expect(throws: TrackingError.invalidVisibility(bad)) { try fixture.tracker.impression(adID: "a", visibility: bad) }
        let memory = try AdTallyTracker(configuration: TrackerConfiguration(endpoint: TrackerFixture.endpoint, storage: .memory))
        #expect(throws: TrackingError.noSession) { try memory.impression(adID: "a") }
        try memory.setSession("s")
        #expect(throws: TrackingError.noSnapshot) { try memory.click(adID: "a") }
        #expect(try memory.click(adID: "a", snapshotID: "feed-1").adID == "a")
        #expect(await memory.shutdown(timeout: TrackerFixture.shutdownTimeout), "a tracker with nothing to write stops")
        await fixture.shutdown()
        #expect(throws: TrackerError.invalidConfiguration("maxBatch must be 1...500, not 501")) {
            var configuration = TrackerConfiguration(endpoint: TrackerFixture.endpoint, storage: .memory)
            configuration.maxBatch = 501
            _ = try AdTallyTracker(configuration: configuration)
        }
    }

    /// A full queue drops the oldest waiting events, counts them and reports which. The batch in
    /// flight counts towards the bound but is never dropped: the server may have counted it already.
    @Test func fullQueueDropsOldestAndReports() async throws {
        let fixture = try TrackerFixture { $0.capacity = 8; $0.maxBatch = 3; $0.maxDelay = .seconds(60) }
        let first = try (1...3).map { try fixture.tracker.impression(adID: "ad-\($0)") }
        let inFlight = try await fixture.transport.next()
        let later = try (4...12).map { try fixture.tracker.impression(adID: "ad-\($0)") }
        #expect(fixture.tracker.statistics.pending == 8)
        let flush = Task { await fixture.tracker.flush() }
        inFlight.answer(try ServerAnswers.answered(inFlight.request))
        var rest: [String] = []
        for _ in 0..<2 { rest += try ServerAnswers.eventIDs(in: try await fixture.acceptNext()) }
        #expect(await flush.value == .delivered)

        #expect(try ServerAnswers.eventIDs(in: inFlight.request) == first.map { $0.uuidString.lowercased() })
        #expect(rest == later.suffix(5).map { $0.uuidString.lowercased() })
        #expect(fixture.tracker.statistics.droppedQueueFull == 4)
        #expect(fixture.reports.dropped.flatMap(\.events).map(\.eventID) == Array(later.prefix(4)))
        #expect(fixture.reports.dropped.allSatisfy { $0.reason == .queueFull })
        await fixture.shutdown()
    }
}
