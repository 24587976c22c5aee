@testable import AdTallyClient
import Foundation
import Testing

/// Retries on a manual clock: no test sleeps; each waits for the tracker's request or its sleep.
@Suite(.timeLimit(.minutes(5))) struct TrackerRetryTests {
    /// Three `503`s, then `200`: the waits are 0.5, 1 and 2 s (jitter fixed at its top), and every
    /// attempt carries the same bytes.
    @Test func exponentialBackoffResendsTheSameBytes() async throws {
        let fixture = try TrackerFixture()
        try fixture.tracker.impression(adID: "ad-1")
        try fixture.tracker.click(adID: "ad-2", position: 4)
        let flush = Task { await fixture.tracker.flush(retrying: true) }

        var attempts: [HeldTransport.Exchange] = []
        for _ in 0..<3 {
            let exchange = try await fixture.transport.next()
            attempts.append(exchange)
            exchange.answer(ServerAnswers.error(503, "unavailable"))
            try await fixture.clock.advanceToNextSleeper()
        }
        let last = try await fixture.transport.next()
        attempts.append(last)
        last.answer(try ServerAnswers.answered(last.request))

        #expect(await flush.value == .delivered)
        #expect(attempts.map(\.sentAt) == [.zero, .milliseconds(500), .milliseconds(1500), .milliseconds(3500)])
        #expect(Set(attempts.map(\.request)).count == 1, "every retry sends the same request")
        #expect(try ServerAnswers.eventIDs(in: last.request).count == 2)
        #expect(fixture.tracker.statistics.failedAttempts == 3)
        #expect(fixture.tracker.statistics.count(status: .accepted) == 2)
        await fixture.shutdown()
    }

    /// `Retry-After: 7` on a `429` holds the next attempt for at least 7 s, although the backoff
    /// says 0.5 s, plus its jitter (here at its top: half of it, 3.5 s); `408` and a lost connection
    /// are retried too.
    @Test func retryAfterAndOtherRetriableFailures() async throws {
        let fixture = try TrackerFixture()
        try fixture.tracker.impression(adID: "ad-1")
        let flush = Task { await fixture.tracker.flush(retrying: true) }

        try await fixture.transport.next().answer(ServerAnswers.error(429, "rate_limited", headers: ["Retry-After": "7"]))
        #expect(try await fixture.clock.nextSleeper() == .milliseconds(10_500))
        fixture.clock.advance(by: .milliseconds(10_499))
        #expect(fixture.transport.waitingCount == 0 && fixture.transport.sent.count == 2, "nothing sent before 10.5 s")
        fixture.clock.advance(by: .milliseconds(1))
        let second = try await fixture.transport.next()
        #expect(second.sentAt == .milliseconds(10_500))
        second.answer(ServerAnswers.error(408, "request_timeout"))
        try await fixture.clock.advanceToNextSleeper()
        try await fixture.transport.next().answer(.failure("connection reset"))
        try await fixture.clock.advanceToNextSleeper()
        try await fixture.acceptNext()
        #expect(await flush.value == .delivered)
        #expect(fixture.tracker.statistics.failedAttempts == 3)
        await fixture.shutdown()
    }

    /// Without `retrying`, a flush returns at the first failure and says when the next attempt is;
    /// the tracker goes on by itself.
    @Test func flushStopsAtAFailureButTheTrackerDoesNot() async throws {
        let fixture = try TrackerFixture()
        try fixture.tracker.impression(adID: "ad-1")
        let flush = Task { await fixture.tracker.flush() }
        try await fixture.transport.next().answer(ServerAnswers.error(500, "internal"))
        #expect(await flush.value == .willRetry(after: .milliseconds(500), reason: "500 internal"))
        // While the backoff runs, a flush says so at once.
        #expect(await fixture.tracker.flush() == .willRetry(after: .milliseconds(500), reason: "500 internal"))
        try await fixture.clock.advanceToNextSleeper()
        try await fixture.acceptNext()
        #expect(await fixture.tracker.flush() == .delivered)
        await fixture.shutdown()
    }

    /// `413`: the batch is split in two, in order, each sent (and retried) whole.
    @Test func payloadTooLargeSplitsTheBatch() async throws {
        let fixture = try TrackerFixture()
        let ids = try (1...5).map { try fixture.tracker.impression(adID: "ad-\($0)") }
        let flush = Task { await fixture.tracker.flush(retrying: true) }
        let whole = try await fixture.transport.next()
        whole.answer(ServerAnswers.error(413, "payload_too_large"))
        let first = try await fixture.transport.next()
        first.answer(ServerAnswers.error(503, "unavailable"))
        try await fixture.clock.advanceToNextSleeper()
        let firstAgain = try await fixture.acceptNext()
        let second = try await fixture.acceptNext()
        #expect(await flush.value == .delivered)

        let lower = ids.map { $0.uuidString.lowercased() }
        #expect(try ServerAnswers.eventIDs(in: whole.request) == lower)
        #expect(try ServerAnswers.eventIDs(in: first.request) == Array(lower[..<2]))
        #expect(firstAgain == first.request)
        #expect(try ServerAnswers.eventIDs(in: second) == Array(lower[2...]))
        #expect(fixture.reports.outcomes.map(\.eventID) == ids)
        await fixture.shutdown()
    }

    /// `400` on a whole batch: dropped and reported with the server's code, never retried; the next
    /// batch goes on.
    @Test func clientErrorDropsTheBatchAndSaysWhy() async throws {
        let fixture = try TrackerFixture { $0.maxBatch = 2 }
        let dropped = try [fixture.tracker.impression(adID: "ad-1"), fixture.tracker.click(adID: "ad-2").eventID]
        let kept = try fixture.tracker.impression(adID: "ad-3")
        let flush = Task { await fixture.tracker.flush(retrying: true) }
        try await fixture.transport.next().answer(ServerAnswers.error(400, "malformed_json"))
        let next = try await fixture.acceptNext()
        #expect(await flush.value == .delivered)

        #expect(try ServerAnswers.eventIDs(in: next) == [kept.uuidString.lowercased()])
        let report = try #require(fixture.reports.dropped.first)
        #expect(report.events.map(\.eventID) == dropped)
        #expect(report.reason == .refused(status: 400, code: "malformed_json", message: "refused in a test"))
        #expect(fixture.tracker.statistics.droppedRefused == 2)
        #expect(fixture.tracker.statistics.failedAttempts == 0)
        #expect(fixture.transport.sent.filter { $0.path == "/v1/events" }.count == 2)
        await fixture.shutdown()
    }

    /// Outcomes are matched to events by position and reach the observer and the statistics.
    @Test func outcomesByPosition() async throws {
        let fixture = try TrackerFixture()
        let impression = try fixture.tracker.impression(adID: "ad-1")
        let repeated = try fixture.tracker.impression(adID: "ad-1")
        let clicks = try (0..<3).map { _ in try fixture.tracker.click(adID: "ad-gone").eventID }
        let flush = Task { await fixture.tracker.flush() }
        let exchange = try await fixture.transport.next()
        exchange.answer(try ServerAnswers.answered(exchange.request) { event in
            switch (event["type"] as? String, event["event_id"] as? String) {
            case ("impression", repeated.uuidString.lowercased()): ("duplicate", "impression_already_counted")
            case ("impression", _): ("accepted", nil)
            default: ("rejected", "ad_not_in_feed")
            }
        })
        #expect(await flush.value == .delivered)
        let outcomes = fixture.reports.outcomes
        #expect(outcomes.map(\.eventID) == [impression, repeated] + clicks)
        #expect(outcomes.map(\.status) == [.accepted, .duplicate, .rejected, .rejected, .rejected])
        #expect(outcomes[1].reason == "impression_already_counted")
        let statistics = fixture.tracker.statistics
        #expect(statistics.count(.click, status: .rejected, reason: "ad_not_in_feed") == 3)
        #expect(statistics.share(ofReason: "ad_not_in_feed", among: .click) == 1)
        #expect(statistics.share(ofReason: "impression_already_counted", among: .impression) == 0.5)
        #expect(statistics.summary.contains("click rejected ad_not_in_feed: 3 (100.0%)"))
        await fixture.shutdown()
    }

    /// A `200` whose results do not fit the batch (another count, another id) is not taken for an
    /// answer: the same batch is sent again.
    @Test func mismatchedAnswerIsRetried() async throws {
        let fixture = try TrackerFixture()
        try fixture.tracker.impression(adID: "ad-1")
        try fixture.tracker.impression(adID: "ad-2")
        let flush = Task { await fixture.tracker.flush(retrying: true) }
        let first = try await fixture.transport.next()
        let wrongID = Data(#"{"results":[{"event_id":"00000000-0000-4000-8000-000000000000","status":"accepted"},{"event_id":"x","status":"accepted"}]}"#.utf8)
        first.answer(.response(TransportResponse(status: 200, headers: [:], body: wrongID)))
        try await fixture.clock.advanceToNextSleeper()
        let second = try await fixture.acceptNext()
        #expect(await flush.value == .delivered)
        #expect(second == first.request)
        #expect(fixture.tracker.statistics.answered == 2)
        await fixture.shutdown()
    }
}
