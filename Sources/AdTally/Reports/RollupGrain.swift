import Timestamps

/// The grains of the rollups (migration 0010), in microseconds: quarter-hour rows, and daily rows
/// per phase. Every zone's local hours and days start on a UTC quarter hour, so these answer any
/// zone's buckets; the fold (`Rollups`) and a report's plan (`ReportSpans`) both cut time with them.
enum RollupGrain {
    static let quarter: Int64 = 900 * 1_000_000
    static let hour: Int64 = 3_600 * 1_000_000
    static let day: Int64 = 24 * hour

    /// The start of the `unit` (from `phase` on) that holds `t`.
    static func floor(_ t: Int64, _ unit: Int64, phase: Int64 = 0) -> Int64 {
        CivilDate.floorDivide(t - phase, unit).quotient * unit + phase
    }

    /// `t` when it starts a `unit`, else the start of the next.
    static func ceiling(_ t: Int64, _ unit: Int64, phase: Int64 = 0) -> Int64 {
        let floored = floor(t, unit, phase: phase)
        return floored == t ? t : floored + unit
    }
}
