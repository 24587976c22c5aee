import Glibc
import Timestamps

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
