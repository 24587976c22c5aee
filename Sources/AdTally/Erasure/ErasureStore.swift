import Postgres
import Timestamps

/// `DELETE /v1/sessions/{session_id}` (API.md section 12): delete, then suppress.
///
/// Three steps, each bounded by the maintenance statement limit:
/// 1. Under the session's row lock, its pair rows (`session_ads`) are deleted and the id's SHA-256
///    digest goes into `erased_sessions`, and that commits: from then on every event transaction
///    that reads no pair row of a session reads the list and refuses the erased one
///    (`BatchReads.sessionsWithoutPairRows`), and so does feed registration.
/// 2. It waits until `final_before` has passed the instant read after that commit: no event
///    transaction that could have missed the suppression is still open.
/// 3. One transaction deletes what names the session and re-keys its raw events and their credit
///    marks as anonymous rows (`adtally_erase_session`, migration 0014), so every count stays.
///
/// Step 3 is all or nothing. A failure after step 1 answers `503`: the session is refused already,
/// and sending the same request again finishes the erasure (every step is idempotent); this is
/// said in docs/API.md.
public struct ErasureStore: Sendable {
    /// What an erasure did: when the session was first erased, and the rows erased by this call.
    public struct Erasure: Sendable, Equatable {
        public let erasedAt: Timestamp
        public let events: Int64
        public let snapshots: Int64
        /// Whether this call suppressed the id (false: it was erased before).
        public let isNew: Bool
    }

    /// The bound on each step (`ADTALLY_MAINTENANCE_STATEMENT_TIMEOUT_SECONDS`).
    public var limit: StatementLimit

    public init(limit: StatementLimit) {
        self.limit = limit
    }

    /// Erases `sessionID` on `connection` (see the type's comment).
    public func erase(_ sessionID: String, on connection: PostgresConnection) throws -> Erasure {
        let (erasedAt, isNew) = try connection.withTransaction(retry: .transientFailures(attempts: 5)) { transaction in
            _ = try transaction.query(limit.forTransaction)
            return try suppress(sessionID, in: transaction)
        }
        try connection.withTransaction(retry: .transientFailures(attempts: 5)) { transaction in
            _ = try transaction.query(limit.forTransaction)
            _ = try transaction.query("SELECT adtally_await_final_before(adtally_clock())")
        }
        let (events, snapshots) = try connection.withTransaction(retry: .transientFailures(attempts: 5)) { transaction in
            _ = try transaction.query(limit.forTransaction)
            _ = try transaction.query("SELECT pg_advisory_xact_lock_shared(\(AdjustmentStore.creditLockKey))")
            guard let row = try transaction.query("SELECT events, snapshots FROM adtally_erase_session(\(sessionID)::text)").first else {
                throw PostgresError(kind: .statementFailed, message: "adtally_erase_session returned no row")
            }
            return (try row.decode(Int64.self, at: 0), try row.decode(Int64.self, at: 1))
        }
        return Erasure(erasedAt: erasedAt, events: events, snapshots: snapshots, isNew: isNew)
    }

    /// Records the digest, or reads when it was recorded: (erased_at, whether this call recorded it).
    private func suppress(_ sessionID: String, in transaction: PostgresTransaction) throws -> (Timestamp, Bool) {
        // The session's row first: a feed registration in flight (which holds it, and checks the
        // list only after taking it) commits before this goes on, so the pair rows deleted next
        // are all there are; after this commits, no event transaction reads a pair row of the
        // session, so each one that sees none reads the list (BatchReads.sessionsWithoutPairRows).
        try transaction.query("SELECT 1 FROM sessions WHERE session_id = \(sessionID) FOR UPDATE")
        try transaction.query("DELETE FROM session_ads WHERE session_id = \(sessionID)")
        let inserted = try transaction.query("""
            INSERT INTO erased_sessions (digest, erased_at)
            VALUES (sha256(convert_to(\(sessionID)::text, 'UTF8')), adtally_clock())
            ON CONFLICT (digest) DO NOTHING
            RETURNING erased_at
            """).first
        if let inserted { return (try inserted.decode(Timestamp.self, at: 0), true) }
        // Recorded before (by an earlier call, or a concurrent one that committed while this insert
        // waited for it): this statement's snapshot is taken after that commit.
        guard let earlier = try transaction.query("""
            SELECT erased_at FROM erased_sessions WHERE digest = sha256(convert_to(\(sessionID)::text, 'UTF8'))
            """).first else {
            throw PostgresError(kind: .statementFailed, message: "erased_sessions has no row for a digest that conflicted")
        }
        return (try earlier.decode(Timestamp.self, at: 0), false)
    }
}
