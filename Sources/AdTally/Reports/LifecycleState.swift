import Postgres
import Timestamps

/// What reports need to know about the history (migrations 0005 and 0010): `final_before`, and how
/// far the rollups reach.
///
/// `final_before` is the earliest instant that a transaction storing events may still stamp its
/// events with: every transaction that stores events takes, before it reads the database's clock
/// for its `received_at`, a shared advisory lock whose key encodes that instant
/// (`adtally_begin_batch`), and holds it until it ends. `adtally_final_before()` reads the clock,
/// then the keys held (`pg_locks`); the smaller is `final_before`. Every event received before it
/// is committed: its transaction either still held its lock (then `final_before` is at most its
/// instant), or took it later (then it read the clock later, so its instant is later), or had
/// ended. A report reads it in a statement before the snapshot that counts, so the count's snapshot
/// sees every such commit, and no event received before it can come later: the counts of a range
/// that ends at or before it never change again. One clock (the database server's) stamps every
/// process's events on every host, so the proof needs no synchronised clocks, only that the
/// database server's clock does not step backwards.
///
/// A hot standby sees none of the primary's locks: there, `final_before` is the value the primary
/// last published in `published_final_before` (every serving process does every few seconds),
/// which the standby has replayed together with every commit before it.
public struct LifecycleState: Sendable, Equatable {
    public var finalBefore: Timestamp
    /// How far the rollups reach.
    var rollups: RollupState

    init(finalBefore: Timestamp, rollups: RollupState) {
        self.finalBefore = finalBefore
        self.rollups = rollups
    }

    /// Every event received before it is in the rollups.
    public var foldedTo: Timestamp { Timestamp(microsecondsSinceEpoch: rollups.foldedTo) }
    /// Microseconds since the epoch of a finite timestamp expression, NULL for an infinite one.
    static func micros(_ expression: StaticString) -> PostgresQuery {
        "CASE WHEN isfinite(\(unsafeSQL: expression)) THEN (extract(epoch FROM \(unsafeSQL: expression)) * 1000000)::bigint END"
    }

    /// The rollups' reach, and `final_before` as published (what a standby answers).
    static let rollupStateQuery: PostgresQuery = """
        SELECT f.final_before, \(micros("s.folded_to")), \(micros("s.quarters_from")), \(micros("s.legacy_days_to")), s.refining,
               \(micros("least((SELECT min(h.hour) FROM ad_hourly_counts h), (SELECT min(q.quarter) FROM ad_quarter_counts q), s.folded_to)")),
               \(micros("greatest(s.folded_to, adtally_clock()) + interval '1 day'"))
        FROM lifecycle_state s, published_final_before f
        """

    /// The daily phases kept.
    static let phasesQuery: PostgresQuery = """
        SELECT phase::bigint, \(micros("days_from")), \(micros("days_to")) FROM rollup_day_phases ORDER BY phase
        """


    static func decodeRollups(_ result: PostgresResult) throws -> (Timestamp, RollupState) {
        guard let row = result.first else {
            throw PostgresError(kind: .statementFailed, message: "lifecycle_state has no row (migration 0005 makes it)")
        }
        var columns = row.columns()
        let published: Timestamp = try columns.next()
        let folded: Int64 = try columns.next()
        let quartersFrom: Int64? = try columns.next()
        let legacyDaysTo: Int64? = try columns.next()
        let refining: Bool = try columns.next()
        let lower: Int64? = try columns.next()
        let upper: Int64? = try columns.next()
        return (published, RollupState(foldedTo: folded, quartersFrom: quartersFrom, legacyDaysTo: legacyDaysTo ?? Int64.min, refining: refining,
                                       phases: [], lowerExtent: lower ?? folded, upperExtent: upper ?? folded))
    }

    static func decodePhases(_ result: PostgresResult) throws -> [RollupState.Phase] {
        try result.rows.map { row in
            var columns = row.columns()
            return RollupState.Phase(minutes: try columns.next(), daysFrom: try columns.next(), daysTo: try columns.next())
        }
    }

    /// The state from its two statements; `finalBefore` computed before (nil on a standby: the
    /// published one).
    static func combine(_ state: (Timestamp, RollupState), _ phases: [RollupState.Phase], finalBefore: Timestamp?) throws -> LifecycleState {
        var rollups = state.1
        rollups.phases = phases
        return LifecycleState(finalBefore: finalBefore ?? state.0, rollups: rollups)
    }

    /// `final_before` on the primary, computed now (`adtally_final_before()`); nil on a standby,
    /// where the report reads the published value in its snapshot. Read before the snapshot that
    /// counts (`LifecycleState`).
    static let finalBeforeQuery: PostgresQuery = """
        SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE adtally_final_before() END
        """

    /// Reads `final_before` in a statement of its own.
    public static func finalBefore(on connection: PostgresConnection) throws -> Timestamp? {
        try connection.query(finalBeforeQuery).first?.decode(Timestamp?.self, at: 0)
    }

    /// Reads it: `final_before` in a statement of its own, then the rollups' reach (outside a
    /// snapshot of the report's: for checks before a report, and for maintenance).
    /// With JIT off: these read a few rows, and a plan made from stale statistics must not be
    /// compiled with LLVM on every call (migration 0017).
    public static func read(on connection: PostgresConnection) throws -> LifecycleState {
        let finalBefore = try finalBefore(on: connection)
        return try connection.withTransaction(.readOnly) { transaction in
            var pipeline = PostgresPipeline()
            pipeline.add("SET LOCAL jit = off")
            let state = pipeline.add(rollupStateQuery, decoding: decodeRollups)
            let phases = pipeline.add(phasesQuery, decoding: decodePhases)
            let results = try transaction.run(pipeline, commit: true)
            return try combine(try results[state], try results[phases], finalBefore: finalBefore)
        }
    }

    /// Publishes `final_before` for standbys (a no-op on a standby). Cheap, one row of a table of
    /// its own that no fold locks, and never waits: when another process is publishing at this
    /// moment, this one skips (its value would be no later), and under a short lock timeout.
    @discardableResult
    public static func publishFinalBefore(on connection: PostgresConnection) throws -> Timestamp? {
        try connection.withTransaction { transaction in
            var pipeline = PostgresPipeline()
            pipeline.add("SET LOCAL lock_timeout = '1s'")
            let published = pipeline.add("""
                UPDATE published_final_before p SET final_before = greatest(p.final_before, adtally_final_before()), updated_at = now()
                WHERE NOT pg_is_in_recovery()
                  AND p.singleton IN (SELECT q.singleton FROM published_final_before q FOR UPDATE SKIP LOCKED)
                RETURNING p.final_before
                """) { try $0.first?.decode(Timestamp.self, at: 0) }
            return try transaction.run(pipeline, commit: true)[published]
        }
    }
}
