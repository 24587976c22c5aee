import Contract
import Foundation
import Postgres
import Timestamps

/// What the history keeps and for how long (API.md section 7): raw events for the retention, a day
/// at a time; event ids for as long as a replay could pass rule 1; sessions until they have been
/// idle for the TTL. Nothing here blocks ingestion: a day's partition goes with `DETACH ...
/// CONCURRENTLY` then `DROP`, never a long `DELETE`; the ledger and sessions go in short
/// transactions of bounded size.
enum Retention {
    /// A partition of `events` as maintenance sees it.
    struct Partition: Equatable {
        let name: String
        /// The end of the range it covers.
        let upper: Timestamp?
        let detachPending: Bool
    }

    static func partitions(on connection: PostgresConnection) throws -> [Partition] {
        try connection.query("SELECT name, upper, detach_pending FROM adtally_event_partitions()").rows.map { row in
            var columns = row.columns()
            return Partition(name: try columns.next(), upper: try columns.next(), detachPending: try columns.next())
        }
    }

    /// A partition name this program made (`events_legacy`, `events_pYYYYMMDD`): the only names
    /// ever put into a DDL statement here (DDL takes no parameters), after this check, and quoted as
    /// identifiers all the same.
    static func isOwnPartitionName(_ name: String) -> Bool {
        if name == "events_legacy" { return true }
        let digits = name.utf8.dropFirst("events_p".utf8.count)
        return name.hasPrefix("events_p") && digits.count == 8 && digits.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// The start of the day a daily partition covers (`events_pYYYYMMDD`); nil for another name.
    static func dayStart(of name: String) -> Timestamp? {
        guard name.hasPrefix("events_p"), isOwnPartitionName(name), name != "events_legacy" else { return nil }
        let digits = Array(name.utf8.dropFirst("events_p".utf8.count)).map { Int64($0) - 48 }
        let year = digits[0] * 1000 + digits[1] * 100 + digits[2] * 10 + digits[3]
        let date = CivilDate(year: year, month: digits[4] * 10 + digits[5], day: digits[6] * 10 + digits[7])
        guard date.isValid else { return nil }
        return Timestamp(microsecondsSinceEpoch: date.daysSinceEpoch * 86_400 * 1_000_000)
    }

    /// Runs `body` with maintenance's statement limit on the session (for the statements that
    /// cannot run in a transaction, `DETACH ... CONCURRENTLY`), and resets it after.
    @discardableResult static func limited<T>(_ statementTimeout: String, on connection: PostgresConnection, _ body: () throws -> T) throws -> T {
        try connection.query("SELECT set_config('statement_timeout', \(statementTimeout), false)")
        defer { _ = try? connection.execute("RESET statement_timeout") }
        return try body()
    }

    /// Drops the partitions whose whole range lies before `horizon` and has been folded (the
    /// counts outlive the raw rows), except those whose hourly history of before 0010 is still to
    /// be re-folded from them (`refiningBefore`: the history before it). `DETACH ... CONCURRENTLY`
    /// waits for the transactions that may still read the partition without blocking anyone, and
    /// runs outside a transaction; Citus, which does not support it, gets a plain `DETACH` under a
    /// lock timeout. A statement given up (maintenance's statement limit) leaves a partition
    /// pending detach, which the next run finishes, or a detached table, which
    /// `dropDetachedLeftovers` drops. Returns the names dropped.
    static func dropAgedPartitions(horizon: Timestamp, foldedTo: Timestamp, refiningBefore: Timestamp?, citus: Bool, lockTimeout: String,
                                   statementTimeout: String, on connection: PostgresConnection) throws -> [String] {
        var dropped: [String] = []
        for partition in try partitions(on: connection) {
            guard let upper = partition.upper, upper <= horizon, upper <= foldedTo, isOwnPartitionName(partition.name) else { continue }
            if let refiningBefore {
                // Its raw rows are still needed to re-fold the hourly history.
                guard let lower = dayStart(of: partition.name), lower >= refiningBefore else { continue }
            }
            do {
                if partition.detachPending {
                    // A detach that a stopped process left half done.
                    try limited(statementTimeout, on: connection) {
                        try connection.execute("ALTER TABLE events DETACH PARTITION \(identifier: partition.name) FINALIZE")
                    }
                } else if citus {
                    try connection.withTransaction { transaction in
                        var pipeline = PostgresPipeline()
                        pipeline.add("SELECT set_config('lock_timeout', \(lockTimeout), true)")
                        pipeline.add(.statementTimeout(statementTimeout))
                        pipeline.add("ALTER TABLE events DETACH PARTITION \(identifier: partition.name)")
                        _ = try transaction.run(pipeline, commit: true)
                    }
                } else {
                    try limited(statementTimeout, on: connection) {
                        try connection.execute("ALTER TABLE events DETACH PARTITION \(identifier: partition.name) CONCURRENTLY")
                    }
                }
            } catch let error as PostgresError where !error.isConnectionGone {
                // Another process detached it meanwhile, a lock did not come in time, or the
                // statement limit passed: next run.
                continue
            }
            try limited(statementTimeout, on: connection) {
                try connection.execute("DROP TABLE IF EXISTS \(identifier: partition.name)")
            }
            dropped.append(partition.name)
        }
        return dropped
    }

    /// Drops the tables named like a day's partition (`events_pYYYYMMDD`) that are no longer
    /// partitions of `events`: a detach that completed when its `DROP` was given up (or its process
    /// stopped). Returns their names.
    static func dropDetachedLeftovers(statementTimeout: String, on connection: PostgresConnection) throws -> [String] {
        let names = try connection.query("""
            SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname ~ '^events_p[0-9]{8}$'
              AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
            ORDER BY 1
            """).rows.map { try $0.decode(String.self, at: 0) }
        var dropped: [String] = []
        for name in names where isOwnPartitionName(name) {
            try limited(statementTimeout, on: connection) {
                try connection.execute("DROP TABLE IF EXISTS \(identifier: name)")
            }
            dropped.append(name)
        }
        return dropped
    }

    /// Deletes the rollup rows of ads no snapshot ever registered (not in `ads`) over the history
    /// whose raw rows are gone (before the oldest partition kept), since the last sweep: such an
    /// ad is counted only while its raw rows exist (API 1.3, sections 3 and 7). A day row that
    /// began before the raw rows' start goes too. Returns the rows deleted.
    static func deleteUnregisteredRollups(statementTimeout: String, on connection: PostgresConnection) throws -> Int {
        let oldest = try partitions(on: connection).first { isOwnPartitionName($0.name) }
        // Nothing is gone while the partition that has no lower bound (events_legacy) is kept.
        guard let oldest, let keptFrom = dayStart(of: oldest.name) else { return 0 }
        return try connection.withTransaction { transaction in
            var deleting = PostgresPipeline()
            deleting.add(.statementTimeout(statementTimeout))
            let unregistered: StaticString = "NOT EXISTS (SELECT 1 FROM ads a WHERE a.ad_id = x.ad_id)"
            // From the last sweep on (minus infinity the first time: its value is read in SQL).
            let from: StaticString = "(SELECT unregistered_swept_to FROM lifecycle_state)"
            let quarters = deleting.add("""
                DELETE FROM ad_quarter_counts x WHERE x.quarter >= \(unsafeSQL: from) AND x.quarter < \(keptFrom) AND \(unsafeSQL: unregistered)
                """) { $0.affectedRows }
            let days = deleting.add("""
                DELETE FROM ad_day_counts x WHERE x.phase IN (SELECT p.phase FROM rollup_day_phases p)
                  AND x.day >= \(unsafeSQL: from) - interval '1 day' AND x.day < \(keptFrom) AND \(unsafeSQL: unregistered)
                """) { $0.affectedRows }
            let hours = deleting.add("""
                DELETE FROM ad_hourly_counts x WHERE x.hour >= \(unsafeSQL: from) AND x.hour < \(keptFrom) AND \(unsafeSQL: unregistered)
                """) { $0.affectedRows }
            let legacyDays = deleting.add("""
                DELETE FROM ad_daily_counts x WHERE x.day >= \(unsafeSQL: from) - interval '1 day' AND x.day < \(keptFrom) AND \(unsafeSQL: unregistered)
                """) { $0.affectedRows }
            deleting.add("UPDATE lifecycle_state SET unregistered_swept_to = greatest(unregistered_swept_to, \(keptFrom))")
            let done = try transaction.run(deleting, commit: true)
            return try done[quarters] + done[days] + done[hours] + done[legacyDays]
        }
    }

    /// Finds the oldest raw event kept again (after partitions were dropped, or when it was never
    /// found), reading the partitions from the oldest until one has rows, and records it.
    static func refreshOldestReceived(on connection: PostgresConnection) throws -> Timestamp? {
        var oldest: Timestamp?
        for partition in try partitions(on: connection) where isOwnPartitionName(partition.name) {
            if let found = try connection.query("SELECT min(received_at) FROM \(identifier: partition.name)").first?.decode(Timestamp?.self, at: 0) {
                oldest = found
                break
            }
        }
        try connection.query("UPDATE lifecycle_state SET oldest_received_at = \(oldest)")
        return oldest
    }

    /// Deletes the credit marks (API 1.4) of raw rows that retention dropped: those received before
    /// `oldestKept`, the oldest raw row kept. The adjustments and their per-ad totals stay forever;
    /// a mark only says which raw row a credit covers, and its row is gone. Marks are few (one per
    /// credited event), found by their `received_at` index. Returns how many went.
    static func pruneCreditMarks(before oldestKept: Timestamp, statementTimeout: String, on connection: PostgresConnection) throws -> Int {
        var pipeline = PostgresPipeline()
        pipeline.add(PostgresQuery.statementTimeout(statementTimeout))
        let pruned = pipeline.add("DELETE FROM credit_marks WHERE received_at < \(oldestKept)") { $0.affectedRows }
        return try connection.run(pipeline)[pruned]
    }

    /// Deletes the ledger entries received before `cutoff` (a replay of them fails rule 1 anyway),
    /// ten minutes of them per transaction, for at most `budget`. Returns how many went.
    static func pruneLedger(before cutoff: Timestamp, budget: TimeInterval, statementTimeout: String = "300s",
                            on connection: PostgresConnection) throws -> Int {
        let slice: Int64 = 10 * 60 * 1_000_000
        let deadline = Date().addingTimeInterval(budget)
        var deleted = 0
        while Date() < deadline {
            guard let oldest = try connection.query("SELECT min(received_at) FROM event_ids").first?.decode(Timestamp?.self, at: 0),
                  oldest < cutoff else { break }
            let end = min(oldest.adding(microseconds: slice), cutoff)
            var pipeline = PostgresPipeline()
            pipeline.add(.statementTimeout(statementTimeout))
            let pruned = pipeline.add("DELETE FROM event_ids WHERE received_at >= \(oldest) AND received_at < \(end)") { $0.affectedRows }
            deleted += try connection.run(pipeline)[pruned]
        }
        return deleted
    }

    /// Forgets sessions idle since before `cutoff` (no snapshot registered and no event stored on
    /// or after that day), at most `limit` per transaction, for at most `budget`. A forgotten
    /// session is as if it never existed, except that its snapshot ids stay owned. Each transaction
    /// takes the locks feed registration takes, in the same order (the session's row, then its ads'),
    /// and checks idleness again under them. Returns how many went.
    static func forgetIdleSessions(before cutoff: Date, limit: Int = 500, budget: TimeInterval, statementTimeout: String = "300s",
                                   on connection: PostgresConnection) throws -> Int {
        let deadline = Date().addingTimeInterval(budget)
        let day = PostgresTimestamp.format(microseconds: PostgresTimestamp.microseconds(of: cutoff))
        var forgotten = 0
        while Date() < deadline {
            let candidates = try connection.query("""
                SELECT session_id FROM sessions WHERE last_active_on < (\(day)::timestamptz AT TIME ZONE 'UTC')::date LIMIT \(limit)
                """).rows.map { try $0.decode(String.self, at: 0) }
            guard !candidates.isEmpty else { break }
            let sorted = candidates.sorted { $0.utf8Precedes($1) }
            let idle = try connection.withTransaction { transaction in
                var locking = PostgresPipeline()
                locking.add(.statementTimeout(statementTimeout))
                locking.add(ReportStore.keyAccessOnly)
                // Locks and checks again, in key order: an event or a snapshot that came meanwhile
                // made the session active, and it stays.
                let locked = locking.add("""
                    UPDATE sessions AS s SET last_active_on = s.last_active_on
                    FROM unnest(\(PostgresBinaryArray.text(sorted))::text[]) AS u(s)
                    WHERE s.session_id = u.s AND s.last_active_on < (\(day)::timestamptz AT TIME ZONE 'UTC')::date
                    RETURNING s.session_id
                    """) { try $0.rows.map { try $0.decode(String.self, at: 0) } }
                let idle = try transaction.run(locking)[locked].sorted { $0.utf8Precedes($1) }
                let ids = PostgresBinaryArray.text(idle)
                var deleting = PostgresPipeline()
                deleting.add("DELETE FROM session_ads WHERE session_id = ANY (\(ids)::text[])")
                // snapshot_ads go with their snapshots (ON DELETE CASCADE); snapshot_owners stay.
                deleting.add("DELETE FROM snapshots WHERE session_id = ANY (\(ids)::text[])")
                deleting.add("DELETE FROM sessions WHERE session_id = ANY (\(ids)::text[])")
                _ = try transaction.run(deleting, commit: true)
                return idle
            }
            forgotten += idle.count
            if idle.isEmpty { break }
        }
        return forgotten
    }
}
