import Foundation
import Postgres
import Timestamps

/// The exact per-ad rollups (migration 0010), advanced incrementally behind the watermark:
///
/// - **Quarter hours, continuously.** Every event received before `final_before` is folded into
///   the row of its ad and quarter hour, in the transaction that moves `folded_to` past it, and
///   only once `final_before` has passed it, so every such event is committed and no more can come
///   (`LifecycleState`). The quarter that `folded_to` falls in is folded piece by piece: its row is
///   added to by each fold, and holds exactly the events before `folded_to`. A report reads the
///   row and `folded_to` from one snapshot, and raw rows only from `folded_to` on.
/// - **Days, per phase.** Once `folded_to` has passed a 24-hour day of a phase (a time of day in
///   UTC at which some zone's local days start), the day's 96 quarter rows are summed into one row
///   per ad, forward as days end and backward over the history the phase did not cover yet.
/// - **The hourly history of before 0010**, re-folded from its raw rows while they are kept, an
///   hour per transaction, newest first (`refineLegacy`).
///
/// Events are never changed once stored and their partitions are dropped only after they were
/// folded, so a row, once its range lies before `folded_to`, equals its raw count forever. Every
/// step is a short transaction under maintenance's advisory lock (two processes never fold at once)
/// and a statement time limit.
enum Rollups {
    /// What one fold did.
    struct Fold: Equatable {
        /// The instants folded, `[from, to)`.
        let from: Timestamp
        let to: Timestamp
        /// Ads with a row added to.
        let ads: Int
        /// Stored events counted.
        let events: Int64
        /// Whether it folded up to `final_before` (false: it stopped short, more is waiting).
        let caughtUp: Bool
    }

    /// The most one fold takes at once (catching up after a pause, or history loaded in bulk): six
    /// hours of events, a few hundred thousand groups of an ad and a quarter at most in memory.
    static let foldSpan: Int64 = 6 * RollupGrain.hour

    /// The first statements of a fold's transaction: the statement limit, then maintenance's lock,
    /// whose handle answers false when another process holds it.
    static func opening(_ statementTimeout: String) -> (PostgresPipeline, PostgresPipeline.Handle<Bool>) {
        var opening = PostgresPipeline()
        opening.add(.statementTimeout(statementTimeout))
        let locked = opening.add(Maintenance.tryLock) { try $0.first?.decode(Bool.self, at: 0) == true }
        return (opening, locked)
    }

    /// Folds the events received since `folded_to` and before `final_before` (at most `foldSpan` of
    /// them, ending on a quarter hour when it stops short) into their quarters' rows, in a
    /// transaction of its own under the maintenance lock. nil when there is nothing to fold, or
    /// another process holds the lock (`skipped`).
    static func foldRecent(statementTimeout: String, on connection: PostgresConnection) throws -> (fold: Fold?, skipped: Bool) {
        try connection.withTransaction { transaction in
            var (opening, locked) = Self.opening(statementTimeout)
            let reach = opening.add("""
                SELECT \(LifecycleState.micros("folded_to")), \(LifecycleState.micros("adtally_final_before()"))
                FROM lifecycle_state FOR UPDATE
                """) { result -> (Int64, Int64)? in
                guard let row = result.first else { return nil }
                return (try row.decode(Int64.self, at: 0), try row.decode(Int64.self, at: 1))
            }
            let opened = try transaction.run(opening)
            guard try opened[locked] else { return (nil, true) }
            guard let (folded, finalBefore) = try opened[reach], folded < finalBefore else { return (nil, false) }
            var end = finalBefore
            if end - folded > foldSpan {
                end = RollupGrain.floor(folded + foldSpan, RollupGrain.quarter)
                if end <= folded { end = folded + foldSpan }
            }
            let from = Timestamp(microsecondsSinceEpoch: folded), to = Timestamp(microsecondsSinceEpoch: end)
            // Statements after the one that read final_before: their snapshots see every commit
            // before it.
            var folding = PostgresPipeline()
            // The groups of a catch-up fit in memory rather than spill to disk.
            folding.add("SET LOCAL work_mem = '128MB'")
            let counts = folding.add("""
                WITH f AS (
                    SELECT e.ad_id, date_bin('15 minutes', e.received_at, timestamptz '2000-01-01T00:00:00Z') AS quarter,
                    \(CountColumn.rawCounts)
                    FROM events e
                    WHERE e.received_at >= \(from) AND e.received_at < \(to)
                    GROUP BY 1, 2
                ), added AS (
                    INSERT INTO ad_quarter_counts (ad_id, quarter, \(CountColumn.names))
                    SELECT * FROM f
                    ON CONFLICT (ad_id, quarter) DO UPDATE SET \(CountColumn.addingExcluded(table: "ad_quarter_counts"))
                )
                SELECT count(DISTINCT ad_id), coalesce(sum(\(CountColumn.eventsIn(prefix: ""))), 0)::bigint FROM f
                """) { result -> (Int, Int64) in
                (try result.first?.decode(Int.self, at: 0) ?? 0, try result.first?.decode(Int64.self, at: 1) ?? 0)
            }
            folding.add("UPDATE lifecycle_state SET folded_to = \(to), updated_at = now()")
            let (ads, events) = try transaction.run(folding, commit: true)[counts]
            return (Fold(from: from, to: to, ads: ads, events: events, caughtUp: end == finalBefore), false)
        }
    }

    /// Folds one 24-hour day of one phase from its quarter rows: the next day that `folded_to`
    /// has passed, else the day before the phase's first (history not covered yet), in a transaction
    /// of its own under the maintenance lock. Returns the phase and day folded; nil when every phase
    /// is up to date.
    static func foldNextDay(statementTimeout: String, on connection: PostgresConnection) throws -> (fold: (phase: Int64, day: Timestamp)?, skipped: Bool) {
        try connection.withTransaction { transaction in
            var (opening, locked) = Self.opening(statementTimeout)
            let reach = opening.add("""
                SELECT \(LifecycleState.micros("folded_to")), \(LifecycleState.micros("quarters_from")),
                       \(LifecycleState.micros("(SELECT min(q.quarter) FROM ad_quarter_counts q)"))
                FROM lifecycle_state
                """) { result -> (folded: Int64, quartersFrom: Int64?, oldest: Int64?)? in
                guard let row = result.first else { return nil }
                return (try row.decode(Int64.self, at: 0), try row.decode(Int64?.self, at: 1), try row.decode(Int64?.self, at: 2))
            }
            let phases = opening.add("""
                SELECT phase::bigint, \(LifecycleState.micros("days_from")), \(LifecycleState.micros("days_to"))
                FROM rollup_day_phases ORDER BY phase FOR UPDATE
                """, decoding: LifecycleState.decodePhases)
            let opened = try transaction.run(opening)
            guard try opened[locked] else { return (nil, true) }
            guard let reached = try opened[reach] else { return (nil, false) }
            let day = RollupGrain.day
            let floorQuarters = reached.quartersFrom ?? Int64.min
            var chosen: (phase: Int64, day: Int64, forward: Bool)?
            for phase in try opened[phases] {
                let offset = phase.minutes * 60 * 1_000_000
                if reached.quartersFrom != nil, phase.daysTo < floorQuarters {
                    // A phase that starts in the hourly history: it starts again at the quarter rows.
                    let start = RollupGrain.ceiling(floorQuarters, day, phase: offset)
                    if start + day <= reached.folded {
                        chosen = (phase.minutes, start, true)
                        break
                    }
                    continue
                }
                if phase.daysTo + day <= reached.folded {
                    chosen = (phase.minutes, phase.daysTo, true)
                    break
                }
            }
            if chosen == nil, let oldest = reached.oldest {
                for phase in try opened[phases] {
                    let offset = phase.minutes * 60 * 1_000_000
                    let limit = max(floorQuarters, RollupGrain.floor(oldest, day, phase: offset))
                    if phase.daysFrom - day >= limit {
                        chosen = (phase.minutes, phase.daysFrom - day, false)
                        break
                    }
                }
            }
            guard let chosen else { return (nil, false) }
            let start = Timestamp(microsecondsSinceEpoch: chosen.day)
            let end = Timestamp(microsecondsSinceEpoch: chosen.day + day)
            var folding = PostgresPipeline()
            folding.add("""
                INSERT INTO ad_day_counts (ad_id, phase, day, \(CountColumn.names))
                SELECT x.ad_id, \(chosen.phase)::smallint, \(start)::timestamptz, \(CountColumn.rollupSums)
                FROM ad_quarter_counts x
                WHERE x.quarter >= \(start) AND x.quarter < \(end)
                GROUP BY x.ad_id
                """)
            if chosen.forward {
                folding.add("""
                    UPDATE rollup_day_phases SET days_to = \(end), days_from = CASE WHEN days_to = \(start) THEN days_from ELSE \(start) END
                    WHERE phase = \(chosen.phase)::smallint
                    """)
            } else {
                folding.add("UPDATE rollup_day_phases SET days_from = \(start) WHERE phase = \(chosen.phase)::smallint")
            }
            _ = try transaction.run(folding, commit: true)
            return ((chosen.phase, start), false)
        }
    }

    /// What one step of the legacy re-fold did.
    enum Refinement: Equatable {
        /// The hour starting then is quarter rows now.
        case refined(Timestamp)
        /// Nothing left to re-fold (no hourly history, or its raw rows are gone).
        case done
    }

    /// Re-folds the newest hour of the hourly history (before `quarters_from`) from its raw rows
    /// into quarter rows, if they are all still kept, and checks them equal to the hourly row per
    /// ad and count before it deletes that row and moves `quarters_from` back: no count changes.
    /// nil when another process holds the lock (`skipped`).
    static func refineLegacy(statementTimeout: String, on connection: PostgresConnection) throws -> (step: Refinement?, skipped: Bool) {
        try connection.withTransaction { transaction in
            var (opening, locked) = Self.opening(statementTimeout)
            // The state row first, then the history's newest hour below quarters_from with that
            // instant bound: on Citus a distributed table may not be joined to (or correlated
            // with) the coordinator's local lifecycle_state in one statement.
            let state = opening.add("""
                SELECT s.refining, \(LifecycleState.micros("s.quarters_from")) FROM lifecycle_state s FOR UPDATE
                """) { result -> (refining: Bool, quartersFrom: Int64?)? in
                guard let row = result.first else { return nil }
                return (try row.decode(Bool.self, at: 0), try row.decode(Int64?.self, at: 1))
            }
            let opened = try transaction.run(opening)
            guard try opened[locked] else { return (nil, true) }
            guard let current = try opened[state], current.refining else { return (.done, false) }
            // quarters_from is -infinity (micros answers NULL) once no hourly history is left.
            var foundHour: Int64?
            if let quartersFrom = current.quartersFrom {
                var finding = PostgresPipeline()
                let newest = finding.add("""
                    SELECT \(LifecycleState.micros("max(h.hour)")) FROM ad_hourly_counts h
                    WHERE h.hour < \(Timestamp(microsecondsSinceEpoch: quartersFrom))::timestamptz
                    """) { try $0.first?.decode(Int64?.self, at: 0) }
                foundHour = try transaction.run(finding)[newest] ?? nil
            }
            guard let hourStart = foundHour else {
                // No hourly history left: everything is quarter rows.
                _ = try transaction.run({ var p = PostgresPipeline(); p.add("UPDATE lifecycle_state SET quarters_from = '-infinity', refining = false"); return p }(),
                                    commit: true)
                return (.done, false)
            }
            // Whether the raw rows of that hour are kept: some partition starts at or before it (the
            // oldest may have no lower bound).
            var keeping = PostgresPipeline()
            let kept = keeping.add("""
                SELECT coalesce(bool_or(p.lower IS NULL OR p.lower <= \(Timestamp(microsecondsSinceEpoch: hourStart))::timestamptz), false)
                FROM (SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz AS lower
                      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                      WHERE i.inhparent = 'events'::regclass) p
                """) { try $0.first?.decode(Bool.self, at: 0) ?? false }
            let found = (hour: hourStart, kept: try transaction.run(keeping)[kept])
            let hour = Timestamp(microsecondsSinceEpoch: hourStart)
            let next = Timestamp(microsecondsSinceEpoch: hourStart + RollupGrain.hour)
            let legacy = CountColumn.allCases.filter(\.inLegacyRollups)
            let refold: PostgresQuery = """
                SELECT e.ad_id, date_bin('15 minutes', e.received_at, timestamptz '2000-01-01T00:00:00Z') AS quarter, \(CountColumn.rawCounts)
                FROM events e WHERE e.received_at >= \(hour) AND e.received_at < \(next) GROUP BY 1, 2
                """
            var checking = PostgresPipeline()
            let differing = checking.add("""
                SELECT count(*) FROM (
                    SELECT f.ad_id, \(legacy.map { "sum(f.\(unsafeSQL: $0.sqlName))::bigint AS \(unsafeSQL: $0.sqlName)" as PostgresQuery }.joined(separator: ", ")),
                           sum(\(CountColumn.allCases.filter { !$0.inLegacyRollups }.map { "f.\(unsafeSQL: $0.sqlName)" as PostgresQuery }.joined(separator: " + "))) AS newer
                    FROM (\(refold)) f GROUP BY f.ad_id
                ) a FULL JOIN (SELECT * FROM ad_hourly_counts WHERE hour = \(hour)) b ON a.ad_id = b.ad_id
                WHERE ROW(\(legacy.map { "a.\(unsafeSQL: $0.sqlName)" as PostgresQuery }.joined(separator: ", ")))
                      IS DISTINCT FROM ROW(\(legacy.map { "b.\(unsafeSQL: $0.sqlName)" as PostgresQuery }.joined(separator: ", ")))
                   OR a.newer <> 0
                """) { try $0.first?.decode(Int64.self, at: 0) ?? 0 }
            let checked = found.kept ? try transaction.run(checking)[differing] : 1
            guard checked == 0 else {
                // Raw rows gone (or not what was folded): the hourly rows stay as they are, and the
                // history before quarters_from stays hourly.
                _ = try transaction.run({ var p = PostgresPipeline(); p.add("UPDATE lifecycle_state SET refining = false"); return p }(), commit: true)
                return (.done, false)
            }
            var moving = PostgresPipeline()
            moving.add("INSERT INTO ad_quarter_counts (ad_id, quarter, \(CountColumn.names)) \(refold)")
            moving.add("DELETE FROM ad_hourly_counts WHERE hour = \(hour)")
            moving.add("DELETE FROM ad_daily_counts WHERE day > \(hour)::timestamptz - interval '1 day'")  // not day + interval: Citus
            moving.add("UPDATE lifecycle_state SET quarters_from = \(hour), updated_at = now()")
            _ = try transaction.run(moving, commit: true)
            return (.refined(hour), false)
        }
    }

    /// Keeps daily rows for the local days of `zone` (its phases over the last and next 400 days)
    /// from now on: maintenance folds them forward and back. Cheap and idempotent; a zone whose
    /// phases are known already changes nothing.
    static func registerZone(_ zone: String, on connection: PostgresConnection) throws {
        try connection.query("""
            INSERT INTO rollup_day_phases (phase, days_from, days_to)
            SELECT p.phase, b.at, b.at
            FROM (
                SELECT DISTINCT (((extract(epoch FROM ((current_date + g)::timestamp AT TIME ZONE \(zone)))::bigint % 86400) + 86400) % 86400 / 60)::smallint AS phase
                FROM generate_series(-400, 400) AS g
            ) p,
            LATERAL (SELECT to_timestamp(floor((extract(epoch FROM greatest(s.folded_to, s.quarters_from)) - p.phase * 60) / 86400) * 86400 + p.phase * 60) AS at
                     FROM lifecycle_state s) b
            WHERE p.phase % 15 = 0
            ON CONFLICT (phase) DO NOTHING
            """)
    }
}
