import Foundation

/// The tracker's two clocks, injected so that tests can skew the wall clock and drive timers
/// without sleeping: the wall clock stamps `occurred_at`, and the monotonic one runs every timer
/// (journal writes, `maxDelay`, backoff), which must not jump when the user sets the date.
public protocol TrackerClock: Sendable {
    /// The device's wall clock.
    func now() -> Date
    /// Monotonic time since an arbitrary origin.
    func uptime() -> Duration
    /// Suspends until `uptime()` reaches `deadline`; throws `CancellationError` when the task is
    /// cancelled first.
    func sleep(until deadline: Duration) async throws
}

/// The real clocks: `Date()` and `ContinuousClock` (which keeps counting while the device sleeps,
/// so a backoff that ran out during sleep is over at wake-up).
public struct SystemClock: TrackerClock {
    private let origin = ContinuousClock.now

    /// A clock whose `uptime()` starts at zero now.
    public init() {}

    /// `Date()`.
    public func now() -> Date { Date() }

    /// Time since this clock was made.
    public func uptime() -> Duration { ContinuousClock.now - origin }

    /// `Task.sleep` on `ContinuousClock`.
    public func sleep(until deadline: Duration) async throws {
        try await Task.sleep(until: origin + deadline, clock: .continuous)
    }
}
