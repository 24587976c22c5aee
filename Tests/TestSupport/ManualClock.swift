import Runtime
import Synchronization
import Timestamps

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
