import Foundation
import Postgres

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

    /// Drops the partitions whose whole range lies before `horizon` and has been rolled up (the
    /// counts outlive the raw rows). `DETACH ... CONCURRENTLY` waits for the transactions that may
    /// still read the partition without blocking anyone, and runs outside a transaction; Citus, which
    /// does not support it, gets a plain `DETACH` under a lock timeout. Returns the names dropped.
    static func dropAgedPartitions(horizon: Timestamp, rolledUpTo: Timestamp, citus: Bool, lockTimeout: String,
                                   on connection: PostgresConnection) throws -> [String] {
        var dropped: [String] = []
        for partition in try partitions(on: connection) {
            guard let upper = partition.upper, upper <= horizon, upper <= rolledUpTo, isOwnPartitionName(partition.name) else { continue }
            do {
                if partition.detachPending {
                    // A detach that a stopped process left half done.
                    try connection.execute("ALTER TABLE events DETACH PARTITION \(identifier: partition.name) FINALIZE")
                } else if citus {
                    try connection.withTransaction { transaction in
                        var pipeline = PostgresPipeline()
                        pipeline.add("SELECT set_config('lock_timeout', \(lockTimeout), true)")
                        pipeline.add("ALTER TABLE events DETACH PARTITION \(identifier: partition.name)")
                        _ = try transaction.run(pipeline, commit: true)
                    }
                } else {
                    try connection.execute("ALTER TABLE events DETACH PARTITION \(identifier: partition.name) CONCURRENTLY")
                }
            } catch let error as PostgresError where !error.isConnectionGone {
                // Another process detached it meanwhile, or a lock did not come in time: next run.
                continue
            }
            try connection.execute("DROP TABLE IF EXISTS \(identifier: partition.name)")
            dropped.append(partition.name)
        }
        return dropped
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

    /// Deletes the ledger entries received before `cutoff` (a replay of them fails rule 1 anyway),
    /// ten minutes of them per transaction, for at most `budget`. Returns how many went.
    static func pruneLedger(before cutoff: Timestamp, budget: TimeInterval, on connection: PostgresConnection) throws -> Int {
        let slice: Int64 = 10 * 60 * 1_000_000
        let deadline = Date().addingTimeInterval(budget)
        var deleted = 0
        while Date() < deadline {
            guard let oldest = try connection.query("SELECT min(received_at) FROM event_ids").first?.decode(Timestamp?.self, at: 0),
                  oldest < cutoff else { break }
            let end = min(oldest.adding(microseconds: slice), cutoff)
            deleted += try connection.query("DELETE FROM event_ids WHERE received_at >= \(oldest) AND received_at < \(end)").affectedRows
        }
        return deleted
    }

    /// Forgets sessions idle since before `cutoff` (no snapshot registered and no event stored on
    /// or after that day), at most `limit` per transaction, for at most `budget`. A forgotten
    /// session is as if it never existed, except that its snapshot ids stay owned. Each transaction
    /// takes the locks feed registration takes, in the same order (the session's row, then its ads'),
    /// and checks idleness again under them. Returns how many went.
    static func forgetIdleSessions(before cutoff: Date, limit: Int = 500, budget: TimeInterval, on connection: PostgresConnection) throws -> Int {
        let deadline = Date().addingTimeInterval(budget)
        let day = PostgresTimestamp.format(microseconds: PostgresTimestamp.microseconds(of: cutoff))
        var forgotten = 0
        while Date() < deadline {
            let candidates = try connection.query("""
                SELECT session_id FROM sessions WHERE last_active_on < (\(day)::timestamptz AT TIME ZONE 'UTC')::date LIMIT \(limit)
                """).rows.map { try $0.decode(String.self, at: 0) }
            guard !candidates.isEmpty else { break }
            let sorted = candidates.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let idle = try connection.withTransaction { transaction in
                var locking = PostgresPipeline()
                locking.add(CountingState.keyAccessOnly)
                // Locks and checks again, in key order: an event or a snapshot that came meanwhile
                // made the session active, and it stays.
                let locked = locking.add("""
                    UPDATE sessions AS s SET last_active_on = s.last_active_on
                    FROM unnest(\(PostgresBinaryArray.text(sorted))::text[]) AS u(s)
                    WHERE s.session_id = u.s AND s.last_active_on < (\(day)::timestamptz AT TIME ZONE 'UTC')::date
                    RETURNING s.session_id
                    """) { try $0.rows.map { try $0.decode(String.self, at: 0) } }
                let idle = try transaction.run(locking)[locked].sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
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
