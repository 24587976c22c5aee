/// How far the rollups reach (migration 0010, read from `lifecycle_state` and `rollup_day_phases` in
/// the report's snapshot), in microseconds since the epoch.
struct RollupState: Sendable, Equatable {
    /// A daily phase: rows of 24-hour days starting `minutes` after UTC midnight, covering
    /// `[daysFrom, daysTo)`.
    struct Phase: Sendable, Equatable {
        var minutes: Int64
        var daysFrom: Int64
        var daysTo: Int64
    }

    /// Every event received before it is in the rollups (any instant: the last quarter's row may
    /// be partial, up to it).
    var foldedTo: Int64
    /// Quarter rows cover `[quartersFrom, foldedTo)`; before it, the hourly rows of before 0010.
    /// nil: no such history (minus infinity).
    var quartersFrom: Int64?
    /// Legacy daily rows cover the whole UTC days before it (that also end by `quartersFrom`).
    var legacyDaysTo: Int64
    /// Whether the raw rows of the legacy history are all still kept (maintenance re-folds them).
    var refining: Bool
    var phases: [Phase]
    /// The earliest instant any rollup row covers (the fold position when there is none): an
    /// unbounded `from` starts there.
    var lowerExtent: Int64
    /// Past every event received so far (a day after the database clock): an unbounded `to` of a
    /// bucketed listing ends there.
    var upperExtent: Int64
}
