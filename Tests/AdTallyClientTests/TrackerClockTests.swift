@testable import AdTallyClient
import Foundation
import Testing

/// `occurred_at` on the server's clock, whatever the device's says.
@Suite(.timeLimit(.minutes(5))) struct TrackerClockTests {
    static func occurredAt(_ request: TransportRequest) throws -> [Date] {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return try ServerAnswers.events(in: request).map { event in
            guard let text = event["occurred_at"] as? String, let date = formatter.date(from: text) else {
                throw TestFailure("no occurred_at in \(event)")
            }
            return date
        }
    }

    /// A device ten minutes behind the server (the server would refuse nothing here, but its grace
    /// window and tap rule would judge the taps ten minutes early): every event, also one tracked
    /// before the server was ever reached, is stamped within the `Date` header's second.
    @Test func skewedDeviceClockIsCorrected() async throws {
        let skew: TimeInterval = 600
        let fixture = try TrackerFixture(serverSkew: skew)
        try fixture.tracker.impression(adID: "ad-early")
        let flush = Task { await fixture.tracker.flush() }
        let first = try await fixture.acceptNext()
        #expect(await flush.value == .delivered)
        #expect(fixture.transport.sent.first?.path == "/healthz", "the clock is probed before the first batch")

        fixture.clock.advance(by: .seconds(3))
        try fixture.tracker.click(adID: "ad-late")
        let second = Task { await fixture.tracker.flush() }
        let later = try await fixture.acceptNext()
        #expect(await second.value == .delivered)

        let server = fixture.clock.now().addingTimeInterval(skew)
        let stamps = try Self.occurredAt(first) + Self.occurredAt(later)
        let expected = [server.addingTimeInterval(-3), server]
        for (stamp, truth) in zip(stamps, expected) {
            #expect(stamp >= truth && stamp < truth.addingTimeInterval(1), "\(stamp) for a server time of \(truth)")
        }
        #expect(fixture.tracker.statistics.clockCorrection == .milliseconds(600_500))
        await fixture.shutdown()
    }

    /// A device whose clock agrees with the server's (to the header's second) is left alone.
    @Test func rightClockIsLeftAlone() async throws {
        let fixture = try TrackerFixture(serverSkew: 0)
        try fixture.tracker.impression(adID: "ad-1")
        let flush = Task { await fixture.tracker.flush() }
        let request = try await fixture.acceptNext()
        #expect(await flush.value == .delivered)
        #expect(try Self.occurredAt(request) == [fixture.clock.now()])
        #expect(fixture.tracker.statistics.clockCorrection == .zero)
        await fixture.shutdown()
    }

    /// With correction off, no probe is sent and the device's clock is taken as it is.
    @Test func correctionCanBeTurnedOff() async throws {
        let fixture = try TrackerFixture(serverSkew: 600) { $0.correctsClock = false }
        try fixture.tracker.impression(adID: "ad-1")
        let flush = Task { await fixture.tracker.flush() }
        let request = try await fixture.acceptNext()
        #expect(await flush.value == .delivered)
        #expect(try Self.occurredAt(request) == [fixture.clock.now()])
        #expect(fixture.transport.sent.map(\.path) == ["/v1/events"])
        await fixture.shutdown()
    }
}
