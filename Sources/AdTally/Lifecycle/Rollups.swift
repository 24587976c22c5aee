import Postgres

/// The exact hourly and daily per-ad counts (migration 0005), advanced incrementally behind the
/// watermark: an hour is folded once, in the transaction that moves `rolled_up_to` past it, and only
/// when `final_before` has passed its end, so every event of the hour is committed and no more can
/// come (`LifecycleState`). Events are never changed once stored and their partitions are dropped
/// only after they were folded, so an hour's row equals its raw count forever. A complete day is
/// folded from its hours the same way.
enum Rollups {
    /// What one fold did.
    struct Fold: Equatable {
        let start: Timestamp
        /// Ads with a row for it.
        let ads: Int
        /// Stored events counted into it.
        let events: Int64
    }

    /// Folds the hour at `rolled_up_to` if `final_before` has passed its end, in a transaction of
    /// its own under the maintenance lock; nil when it cannot (not yet final, or another process
    /// holds the lock: `skipped` is then true).
    static func foldNextHour(on connection: PostgresConnection) throws -> (fold: Fold?, skipped: Bool) {
        try fold(on: connection, next: """
            SELECT rolled_up_to, rolled_up_to + interval '1 hour' <= adtally_final_before() FROM lifecycle_state FOR UPDATE
            """, insert: """
            INSERT INTO ad_hourly_counts (ad_id, hour, \(CountColumn.names))
            SELECT e.ad_id, $1::timestamptz, \(CountColumn.rawCounts)
            FROM events e
            WHERE e.received_at >= $1 AND e.received_at < $1::timestamptz + interval '1 hour'
            GROUP BY e.ad_id
            """, folded: "SELECT count(*), coalesce(sum(\(Self.eventsInRow)), 0)::bigint FROM ad_hourly_counts WHERE hour = $1", advance: "UPDATE lifecycle_state SET rolled_up_to = $1::timestamptz + interval '1 hour', updated_at = now()")
    }

    /// Folds the day at `days_rolled_up_to` from its hours once they are all folded.
    static func foldNextDay(on connection: PostgresConnection) throws -> (fold: Fold?, skipped: Bool) {
        try fold(on: connection, next: """
            SELECT days_rolled_up_to, days_rolled_up_to + interval '1 day' <= rolled_up_to FROM lifecycle_state FOR UPDATE
            """, insert: """
            INSERT INTO ad_daily_counts (ad_id, day, \(CountColumn.names))
            SELECT x.ad_id, $1::timestamptz, \(CountColumn.allCases.map { "sum(x.\($0.rawValue))" }.joined(separator: ", "))
            FROM ad_hourly_counts x
            WHERE x.hour >= $1 AND x.hour < $1::timestamptz + interval '1 day'
            GROUP BY x.ad_id
            """, folded: "SELECT count(*), coalesce(sum(\(Self.eventsInRow)), 0)::bigint FROM ad_daily_counts WHERE day = $1", advance: "UPDATE lifecycle_state SET days_rolled_up_to = $1::timestamptz + interval '1 day', updated_at = now()")
    }

    /// A row's stored events: the six totals cover every status of both types.
    private static let eventsInRow = [CountColumn.impressions, .clicks, .duplicateImpressions, .rejectedImpressions, .duplicateClicks, .rejectedClicks]
        .map(\.rawValue).joined(separator: " + ")

    /// `insert` folds the period starting at `$1`; `folded` then counts the rows it made and their
    /// events (an hour or day is folded once, so its rows are exactly those), in the same transaction.
    /// Not `RETURNING` from the insert: Citus cannot run a modifying CTE of an `INSERT ... SELECT`
    /// between colocated tables (the daily fold) with a `RETURNING` list.
    private static func fold(on connection: PostgresConnection, next: String, insert: String, folded: String,
                             advance: String) throws -> (fold: Fold?, skipped: Bool) {
        let opened = try connection.pipeline([
            PostgresStatement("BEGIN"),
            Maintenance.tryLock,
            PostgresStatement(next),
        ])
        guard try opened[1].first?.decode(Bool.self, at: 0) == true else {
            try connection.execute("ROLLBACK")
            return (nil, true)
        }
        guard let row = opened[2].first, try row.decode(Bool.self, at: 1) else {
            try connection.execute("COMMIT")
            return (nil, false)
        }
        let start = try row.decode(Timestamp.self, at: 0)
        do {
            // A statement after the one that read final_before: its snapshot sees every commit
            // before it.
            let done = try connection.pipeline([
                PostgresStatement(insert, [start]),
                PostgresStatement(folded, [start]),
                PostgresStatement(advance, [start]),
                PostgresStatement("COMMIT"),
            ])
            let counts = done[1].first
            return (Fold(start: start, ads: try counts?.decode(Int.self, at: 0) ?? 0, events: try counts?.decode(Int64.self, at: 1) ?? 0), false)
        } catch {
            if connection.isInTransaction { _ = try? connection.execute("ROLLBACK") }
            throw error
        }
    }
}
