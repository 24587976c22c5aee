import Foundation
import Synchronization

/// The server's clock, as a seam: rules that depend on time (the click window, the age of an
/// event) are tested with a fixed clock instead of by sleeping.
public protocol WallClock: Sendable {
    /// The current time.
    func now() -> Timestamp
}

/// The real clock.
public struct SystemClock: WallClock {
    public init() {}

    public func now() -> Timestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(microsecondsSinceEpoch: Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000)
    }
}

/// A clock that only moves when told to, for tests.
public final class ManualClock: WallClock {
    private let current: Mutex<Timestamp>

    public init(_ start: Timestamp) {
        current = Mutex(start)
    }

    public func now() -> Timestamp { current.withLock { $0 } }

    /// Moves the clock forward by `seconds` (fractions allowed).
    public func advance(seconds: Double) {
        current.withLock { $0 = $0.adding(microseconds: Int64(seconds * 1_000_000)) }
    }

    /// Sets the clock.
    public func set(_ time: Timestamp) {
        current.withLock { $0 = time }
    }
}
