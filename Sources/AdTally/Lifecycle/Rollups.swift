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
            """, insert: { start in """
            INSERT INTO ad_hourly_counts (ad_id, hour, \(CountColumn.names))
            SELECT e.ad_id, \(start)::timestamptz, \(CountColumn.rawCounts)
            FROM events e
            WHERE e.received_at >= \(start) AND e.received_at < \(start)::timestamptz + interval '1 hour'
            GROUP BY e.ad_id
            """ }, folded: { start in
            "SELECT count(*), coalesce(sum(\(unescaped: eventsInRow)), 0)::bigint FROM ad_hourly_counts WHERE hour = \(start)"
        }, advance: { start in
            "UPDATE lifecycle_state SET rolled_up_to = \(start)::timestamptz + interval '1 hour', updated_at = now()"
        })
    }

    /// Folds the day at `days_rolled_up_to` from its hours once they are all folded.
    static func foldNextDay(on connection: PostgresConnection) throws -> (fold: Fold?, skipped: Bool) {
        try fold(on: connection, next: """
            SELECT days_rolled_up_to, days_rolled_up_to + interval '1 day' <= rolled_up_to FROM lifecycle_state FOR UPDATE
            """, insert: { start in """
            INSERT INTO ad_daily_counts (ad_id, day, \(CountColumn.names))
            SELECT x.ad_id, \(start)::timestamptz, \(CountColumn.rollupSums)
            FROM ad_hourly_counts x
            WHERE x.hour >= \(start) AND x.hour < \(start)::timestamptz + interval '1 day'
            GROUP BY x.ad_id
            """ }, folded: { start in
            "SELECT count(*), coalesce(sum(\(unescaped: eventsInRow)), 0)::bigint FROM ad_daily_counts WHERE day = \(start)"
        }, advance: { start in
            "UPDATE lifecycle_state SET days_rolled_up_to = \(start)::timestamptz + interval '1 day', updated_at = now()"
        })
    }

    /// A row's stored events: the six totals cover every status of both types.
    private static let eventsInRow = [CountColumn.impressions, .clicks, .duplicateImpressions, .rejectedImpressions, .duplicateClicks, .rejectedClicks]
        .map(\.rawValue).joined(separator: " + ")

    /// `insert` folds the period starting at its argument; `folded` then counts the rows it made
    /// and their events (an hour or day is folded once, so its rows are exactly those), in the same
    /// transaction. Not `RETURNING` from the insert: Citus cannot run a modifying CTE of an
    /// `INSERT ... SELECT` between colocated tables (the daily fold) with a `RETURNING` list.
    private static func fold(on connection: PostgresConnection, next: PostgresQuery, insert: (Timestamp) -> PostgresQuery,
                             folded: (Timestamp) -> PostgresQuery, advance: (Timestamp) -> PostgresQuery) throws -> (fold: Fold?, skipped: Bool) {
        try connection.withTransaction { transaction in
            var opening = PostgresPipeline()
            let locked = opening.add(Maintenance.tryLock) { try $0.first?.decode(Bool.self, at: 0) == true }
            let period = opening.add(next) { result -> Timestamp? in
                guard let row = result.first, try row.decode(Bool.self, at: 1) else { return nil }
                return try row.decode(Timestamp.self, at: 0)
            }
            let opened = try transaction.run(opening)
            // Another process holds the lock: nothing done, nothing to commit.
            guard try opened[locked] else { return (nil, true) }
            guard let start = try opened[period] else { return (nil, false) }
            // A statement after the one that read final_before: its snapshot sees every commit
            // before it.
            var folding = PostgresPipeline()
            folding.add(insert(start))
            let counts = folding.add(folded(start)) { result -> (ads: Int, events: Int64) in
                (try result.first?.decode(Int.self, at: 0) ?? 0, try result.first?.decode(Int64.self, at: 1) ?? 0)
            }
            folding.add(advance(start))
            let done = try transaction.run(folding, commit: true)
            let (ads, events) = try done[counts]
            return (Fold(start: start, ads: ads, events: events), false)
        }
    }
}
