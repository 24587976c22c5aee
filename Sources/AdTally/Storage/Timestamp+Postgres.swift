import Postgres

/// Timestamps travel to PostgreSQL as `timestamptz` text with microseconds in UTC.
extension Timestamp: PostgresTextBindable {
    public var postgresText: String? { PostgresTimestamp.format(microseconds: microsecondsSinceEpoch) }
}
