import Postgres

/// The suppression list of erased sessions (API.md section 12): only the SHA-256 digest of each
/// erased id is kept (`erased_sessions`), computed by the database from the id's UTF-8 bytes, so
/// that the id itself is never stored. Read by feed registration and the current feed (and, for
/// a batch's unserved sessions, by `BatchFacts.readErased` on the event path); written by `ErasureStore`.
enum SessionSuppression {
    /// One row, `true`, when `sessionID` is erased.
    static func isErased(_ sessionID: String) -> PostgresQuery {
        "SELECT EXISTS (SELECT 1 FROM erased_sessions e WHERE e.digest = sha256(convert_to(\(sessionID)::text, 'UTF8')))"
    }

    /// Whether `sessionID` is erased, read on `connection`.
    static func isErased(_ sessionID: String, on connection: PostgresConnection) throws -> Bool {
        try connection.query(isErased(sessionID)).first?.decode(Bool.self, at: 0) ?? false
    }

    /// The same inside a transaction.
    static func isErased(_ sessionID: String, in transaction: PostgresTransaction) throws -> Bool {
        try transaction.query(isErased(sessionID)).first?.decode(Bool.self, at: 0) ?? false
    }
}
