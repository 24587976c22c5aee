import Postgres

/// What reports need to know about the history (migration 0005): `final_before`, and how far the
/// rollups reach.
///
/// `final_before` is the earliest instant that a transaction storing events may still stamp its
/// events with: every transaction that stores events takes, before it reads the database's clock
/// for its `received_at`, a shared advisory lock whose key encodes that instant
/// (`adtally_begin_batch`), and holds it until it ends. `adtally_final_before()` reads the clock,
/// then the keys held (`pg_locks`); the smaller is `final_before`. Every event received before it
/// is committed: its transaction either still held its lock (then `final_before` is at most its
/// instant), or took it later (then it read the clock later, so its instant is later), or had
/// ended. A report reads it in a statement before the one that counts, so the count's snapshot sees
/// every such commit, and no event received before it can come later: the counts of a range that
/// ends at or before it never change again. One clock (the database server's) stamps every
/// process's events on every host, so the proof needs no synchronised clocks, only that the
/// database server's clock does not step backwards.
///
/// A hot standby sees none of the primary's locks: there, `final_before` is the value the primary
/// last published in `lifecycle_state` (every serving process does every few seconds), which the
/// standby has replayed together with every commit before it.
public struct LifecycleState: Sendable, Equatable {
    public var finalBefore: Timestamp
    /// The hourly rollups cover every hour before this.
    public var rolledUpTo: Timestamp
    /// The daily rollups cover every day before this.
    public var daysRolledUpTo: Timestamp

    public init(finalBefore: Timestamp, rolledUpTo: Timestamp, daysRolledUpTo: Timestamp) {
        self.finalBefore = finalBefore
        self.rolledUpTo = rolledUpTo
        self.daysRolledUpTo = daysRolledUpTo
    }

    static let readSQL: PostgresQuery = """
        SELECT CASE WHEN pg_is_in_recovery() THEN s.final_before ELSE adtally_final_before() END,
               s.rolled_up_to, s.days_rolled_up_to
        FROM lifecycle_state s
        """

    /// Reads it, in a statement of its own: a report counts in a later one.
    public static func read(on connection: PostgresConnection) throws -> LifecycleState {
        guard let row = try connection.query(readSQL).first else {
            throw PostgresError(kind: .statementFailed, message: "lifecycle_state has no row (migration 0005 makes it)")
        }
        var columns = row.columns()
        return LifecycleState(finalBefore: try columns.next(), rolledUpTo: try columns.next(), daysRolledUpTo: try columns.next())
    }

    /// Publishes `final_before` for standbys (a no-op on a standby). Cheap: one row.
    @discardableResult
    public static func publishFinalBefore(on connection: PostgresConnection) throws -> Timestamp? {
        try connection.query("""
            UPDATE lifecycle_state SET final_before = greatest(final_before, adtally_final_before()), updated_at = now()
            WHERE NOT pg_is_in_recovery()
            RETURNING final_before
            """).first?.decode(Timestamp.self, at: 0)
    }
}
