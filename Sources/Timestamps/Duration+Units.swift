import Dispatch

/// A `Duration` in the units the server's clocks and waits take, converted in one place: whole
/// days, seconds, milliseconds, microseconds and nanoseconds (fractions dropped), and a Dispatch
/// interval. Negative durations give zero nanoseconds; the largest saturate instead of trapping.
extension Duration {
    /// `days` whole days.
    public static func days(_ days: Int) -> Duration { .seconds(days * 86_400) }

    /// The whole seconds of this duration (fractions dropped).
    public var wholeSeconds: Int { Int(components.seconds) }

    /// The whole milliseconds of this duration (fractions dropped).
    public var wholeMilliseconds: Int { Int(components.seconds) * 1_000 + Int(components.attoseconds / 1_000_000_000_000_000) }

    /// The whole microseconds of this duration (fractions dropped).
    public var wholeMicroseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }

    /// Whole nanoseconds, saturating (0 for a negative duration), for comparisons with
    /// `DispatchTime.uptimeNanoseconds`.
    public var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (product, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? UInt64.max : product &+ UInt64(max(0, attoseconds / 1_000_000_000))
    }

    /// This duration for a Dispatch deadline or wait (`.now() + duration.dispatchInterval`).
    public var dispatchInterval: DispatchTimeInterval { .nanoseconds(Int(clamping: nanoseconds)) }
}

extension ContinuousClock.Instant {
    /// The time left until this instant, zero once it has passed: what a stop bounded by a
    /// deadline waits for.
    public var remaining: Duration { Swift.max(.zero, self - ContinuousClock.now) }
}
