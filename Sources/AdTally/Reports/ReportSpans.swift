import Postgres

/// How a report's range `[from, to)` is read: whole UTC days and hours that the rollups cover from
/// them, and only the rest from raw events, so that a report's cost follows the hours it spans, not
/// the events in them. The rollups cover every hour before `rolledUpTo` and every day before
/// `daysRolledUpTo` (both read from `lifecycle_state`; they only grow, and the rows under them are
/// never changed again). Between them the spans cover the range exactly once:
///
///     [from, h1) raw   [h1, d1) hourly   [d1, d2) daily   [d2, h2) hourly   [h2, to) raw
///
/// An empty span is one whose bounds are equal. Unbounded ends are the infinities, which PostgreSQL
/// compares like any instant.
struct ReportSpans: Equatable, Sendable {
    let from: ReportInstant
    let h1: ReportInstant
    let d1: ReportInstant
    let d2: ReportInstant
    let h2: ReportInstant
    let to: ReportInstant

    static let hour: Int64 = 3_600 * 1_000_000
    static let day: Int64 = 24 * hour

    /// The spans of `[from, to)`. `useDays` is false for hourly buckets (a day row cannot be split).
    init(from: Timestamp?, to: Timestamp?, rolledUpTo: Timestamp, daysRolledUpTo: Timestamp, useDays: Bool) {
        let lower = from.map(ReportInstant.at) ?? .minusInfinity
        let upper = to.map(ReportInstant.at) ?? .infinity
        let firstWholeHour = lower.ceiling(Self.hour)
        let endOfWholeHours = min(upper.floor(Self.hour), .at(rolledUpTo))
        self.from = lower
        self.to = upper
        guard firstWholeHour < endOfWholeHours else {
            // No whole rolled-up hour inside: all raw.
            (h1, d1, d2, h2) = (upper, upper, upper, upper)
            return
        }
        h1 = firstWholeHour
        h2 = endOfWholeHours
        let firstWholeDay = firstWholeHour.ceiling(Self.day)
        let endOfWholeDays = min(endOfWholeHours.floor(Self.day), .at(daysRolledUpTo))
        if useDays && firstWholeDay < endOfWholeDays {
            (d1, d2) = (firstWholeDay, endOfWholeDays)
        } else {
            (d1, d2) = (firstWholeHour, firstWholeHour)
        }
    }
}

/// An instant of a report's range, or one of the infinities an unbounded end stands for.
enum ReportInstant: Comparable, Sendable, PostgresTextBindable {
    case minusInfinity
    case at(Timestamp)
    case infinity

    /// The first multiple of `unit` microseconds (since the epoch: UTC hours and days) at or after this.
    func ceiling(_ unit: Int64) -> ReportInstant {
        guard case .at(let time) = self else { return self }
        let (quotient, remainder) = time.microsecondsSinceEpoch.quotientAndRemainder(dividingBy: unit)
        let floor = remainder < 0 ? quotient - 1 : quotient
        let isAligned = remainder == 0
        return .at(Timestamp(microsecondsSinceEpoch: (isAligned ? floor : floor + 1) * unit))
    }

    /// The last multiple of `unit` microseconds at or before this.
    func floor(_ unit: Int64) -> ReportInstant {
        guard case .at(let time) = self else { return self }
        let (quotient, remainder) = time.microsecondsSinceEpoch.quotientAndRemainder(dividingBy: unit)
        return .at(Timestamp(microsecondsSinceEpoch: (remainder < 0 ? quotient - 1 : quotient) * unit))
    }

    var postgresText: String? {
        switch self {
        case .minusInfinity: return "-infinity"
        case .infinity: return "infinity"
        case .at(let time): return time.postgresText
        }
    }
}
