/// An instant, in microseconds since 1970-01-01T00:00:00Z: the precision PostgreSQL's `timestamptz`
/// keeps, so a value survives a round trip through the database unchanged.
///
/// Parsing and formatting are hand-written (`Timestamp+RFC3339.swift`) rather than
/// `DateFormatter`/`ISO8601DateFormatter`, which are slow, locale-sensitive and lenient.
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since the Unix epoch; negative before 1970.
    public var microsecondsSinceEpoch: Int64

    public init(microsecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    public static let microsecondsPerSecond: Int64 = 1_000_000

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    /// This instant shifted by `microseconds` (negative for earlier), saturating instead of trapping.
    public func adding(microseconds: Int64) -> Timestamp {
        let (sum, overflow) = microsecondsSinceEpoch.addingReportingOverflow(microseconds)
        if overflow { return Timestamp(microsecondsSinceEpoch: microseconds < 0 ? .min : .max) }
        return Timestamp(microsecondsSinceEpoch: sum)
    }

    public var description: String { rfc3339 }
}
