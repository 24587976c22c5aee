import Postgres

/// The suppression list of erased sessions (API.md section 12): only the SHA-256 digest of each
/// erased id is kept (`erased_sessions`), computed by the database from the id's UTF-8 bytes, so
/// that the id itself is never stored. Read on the event path (`BatchReads`) and by feed
/// registration; written by `ErasureStore`.
enum SessionSuppression {
    /// The digest of `column` (an SQL expression of type text), as `erased_sessions` keys it.
    static func digest(of column: String) -> String {
        "sha256(convert_to(\(column), 'UTF8'))"
    }

    /// Those of `sessionIDs` that are erased. One index probe a session; on Citus a read of a
    /// reference table, local on every node.
    static func erasedAmong(_ sessionIDs: [String]) -> PostgresQuery {
        """
        SELECT u.s FROM unnest(\(PostgresBinaryArray.text(sessionIDs))::text[]) AS u(s)
        WHERE EXISTS (SELECT 1 FROM erased_sessions e WHERE e.digest = \(unescaped: digest(of: "u.s")))
        """
    }

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
