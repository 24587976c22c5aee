import Timestamps

/// Timestamps travel to PostgreSQL as `timestamptz` text with microseconds in UTC.
extension Timestamp: PostgresTextBindable {
    public var postgresText: String? { PostgresTimestamp.format(microseconds: microsecondsSinceEpoch) }
}

/// And come back from a `timestamptz` column (the session runs in UTC), to the microsecond.
extension Timestamp: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Timestamp {
        guard typeOID == PostgresTypeOID.timestamptz, let microseconds = PostgresTimestamp.parse(text) else {
            throw PostgresError(kind: .typeMismatch, message: "column \(column) (type oid \(typeOID)) cannot be read as a timestamp: \(text.prefix(64))")
        }
        return Timestamp(microsecondsSinceEpoch: microseconds)
    }
}
