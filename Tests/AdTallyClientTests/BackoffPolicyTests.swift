@testable import AdTallyClient
import Testing

@Suite(.timeLimit(.minutes(3))) struct BackoffPolicyTests {
    let policy = BackoffPolicy(base: .milliseconds(500), cap: .seconds(60))

    /// With the largest jitter, each wait doubles from 0.5 s and stops at 60 s; with the smallest it
    /// is half of that, never less.
    @Test func exponentialWithEqualJitter() {
        let ceiling = (1...10).map { policy.delay(afterFailures: $0, unit: 1, retryAfter: nil) }
        #expect(ceiling == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16),
                            .seconds(32), .seconds(60), .seconds(60), .seconds(60)])
        let floor = (1...3).map { policy.delay(afterFailures: $0, unit: 0, retryAfter: nil) }
        #expect(floor == [.milliseconds(250), .milliseconds(500), .seconds(1)])
        #expect(policy.delay(afterFailures: 1000, unit: 1, retryAfter: nil) == .seconds(60))
    }

    /// `Retry-After` is a floor, not a ceiling, and is bounded; after it comes a random part of up
    /// to half of it (at most 30 s), so that clients refused together do not return together.
    @Test func retryAfterIsHonouredWithJitter() {
        #expect(policy.delay(afterFailures: 1, unit: 0, retryAfter: .seconds(7)) == .seconds(7))
        #expect(policy.delay(afterFailures: 1, unit: 0.5, retryAfter: .seconds(7)) == .milliseconds(8750))
        #expect(policy.delay(afterFailures: 1, unit: 1, retryAfter: .seconds(7)) == .milliseconds(10_500))
        #expect(policy.delay(afterFailures: 1, unit: 1, retryAfter: .seconds(1)) == .milliseconds(1500))
        #expect(policy.delay(afterFailures: 8, unit: 1, retryAfter: .seconds(1)) == .seconds(60))
        #expect(policy.delay(afterFailures: 1, unit: 1, retryAfter: .seconds(86_400)) == .seconds(3630))
        #expect(policy.delay(afterFailures: 1, unit: 0, retryAfter: .zero) == .milliseconds(250))
        // Never sooner than Retry-After, whatever the random number.
        for unit in stride(from: 0.0, through: 1.0, by: 0.125) {
            let wait = policy.delay(afterFailures: 1, unit: unit, retryAfter: .seconds(3))
            #expect(wait >= .seconds(3) && wait <= .milliseconds(4500), "\(unit): \(wait)")
        }
    }

    @Test func retryAfterForms() {
        #expect(BackoffPolicy.retryAfter("1", date: nil) == .seconds(1))
        #expect(BackoffPolicy.retryAfter(" 120 ", date: nil) == .seconds(120))
        #expect(BackoffPolicy.retryAfter("Mon, 30 Nov 2026 00:53:30 GMT", date: "Mon, 30 Nov 2026 00:53:20 GMT") == .seconds(10))
        #expect(BackoffPolicy.retryAfter("Mon, 30 Nov 2026 00:53:10 GMT", date: "Mon, 30 Nov 2026 00:53:20 GMT") == .zero)
        #expect(BackoffPolicy.retryAfter("Mon, 30 Nov 2026 00:53:30 GMT", date: nil) == nil)
        #expect(BackoffPolicy.retryAfter("soon", date: nil) == nil)
        #expect(BackoffPolicy.retryAfter("-5", date: nil) == nil)
        #expect(BackoffPolicy.retryAfter(nil, date: nil) == nil)
    }
}

@Suite(.timeLimit(.minutes(3))) struct ClockOffsetEstimatorTests {
    /// A device 10 minutes behind: one exchange of 200 ms bounds the offset to [599.8 s, 601 s).
    @Test func oneExchangeBoundsTheOffset() {
        var estimator = ClockOffsetEstimator()
        #expect(estimator.correction == nil)
        let device: Int64 = 1_796_000_000_000 - 600_000
        estimator.observe(dateSeconds: 1_796_000_000, sentAt: device, receivedAt: device + 200)
        #expect(estimator.lower == 599_800)
        #expect(estimator.upper == 601_000)
        #expect(estimator.correction == 600_400)
    }

    /// Successive exchanges narrow the bounds: the second `Date` ticked over during it.
    @Test func exchangesNarrowTheBounds() {
        var estimator = ClockOffsetEstimator()
        estimator.observe(dateSeconds: 100, sentAt: 40_000, receivedAt: 40_200)   // [59 800, 61 000)
        estimator.observe(dateSeconds: 101, sentAt: 40_900, receivedAt: 41_000)   // [60 000, 61 100)
        estimator.observe(dateSeconds: 101, sentAt: 41_800, receivedAt: 41_850)   // [59 150, 60 200)
        #expect(estimator.lower == 60_000)
        #expect(estimator.upper == 60_200)
        #expect(estimator.correction == 60_100)
    }

    /// A clock that cannot be told from right is left alone.
    @Test func rightClockIsNotCorrected() {
        var estimator = ClockOffsetEstimator()
        estimator.observe(dateSeconds: 1_796_000_000, sentAt: 1_796_000_000_300, receivedAt: 1_796_000_000_350)
        #expect(estimator.correction == 0)
    }

    /// The user set the device's date: the new exchange contradicts the bounds, which start over.
    @Test func contradictionStartsOver() {
        var estimator = ClockOffsetEstimator()
        estimator.observe(dateSeconds: 100, sentAt: 40_000, receivedAt: 40_200)
        estimator.observe(dateSeconds: 200, sentAt: 200_000, receivedAt: 200_100)
        #expect(estimator.lower == -100)
        #expect(estimator.upper == 1000)
        #expect(estimator.correction == 0)
    }
}
