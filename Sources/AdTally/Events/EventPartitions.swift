import Postgres
import Timestamps

/// The daily partitions of `events` (migration 0005): made a week ahead, as tables attached to
/// `events` (`adtally_create_event_partition`, which never takes more than a SHARE UPDATE EXCLUSIVE
/// lock on `events`), and dropped whole once they age out (`Retention`).
public enum EventPartitions {
    /// How many days ahead of today partitions are made.
    static let daysAhead = 7

    /// Makes the partitions of the days from `instant`'s (nil: the database's today) to
    /// `daysAhead` days after it that do not exist yet, in a transaction of its own under a lock
    /// timeout; returns the days made. Safe to run at any time, from any process.
    @discardableResult
    public static func ensure(around instant: Timestamp?, lockTimeout: String = "5s", statementTimeout: String = "300s",
                       on connection: PostgresConnection) throws -> [String] {
        try connection.withTransaction { transaction in
            var pipeline = PostgresPipeline()
            pipeline.add("SELECT set_config('lock_timeout', \(lockTimeout), true)")
            pipeline.add(.statementTimeout(statementTimeout))
            let made = pipeline.add("""
                SELECT to_char(d, 'YYYY-MM-DD')
                FROM (SELECT (coalesce(\(instant)::timestamptz, now()) AT TIME ZONE 'UTC')::date AS today) AS t,
                     generate_series(t.today, t.today + \(daysAhead)::int, interval '1 day') AS d
                WHERE adtally_create_event_partition(d::date)
                """) { try $0.rows.map { try $0.decode(String.self, at: 0) } }
            return try transaction.run(pipeline, commit: true)[made]
        }
    }

    /// Whether `error` is an insert that found no partition for its row's `received_at`. On Citus
    /// the insert runs on a shard of `events`, and the worker's error comes back as an internal
    /// error (SQLSTATE XX000) naming the shard (`no partition of relation "events_102158"`).
    static func isMissingPartition(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        if error.sqlState == SQLState.checkViolation && error.routine == "ExecFindPartition" { return true }
        return (error.sqlState == SQLState.checkViolation || error.sqlState == EventIDLedger.citusRelayedError)
            && error.message.contains("no partition of relation \"events")
    }
}
