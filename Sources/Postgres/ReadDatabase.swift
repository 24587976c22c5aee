import Runtime
import Synchronization

/// Where reports and feed reads go (`GET /v1/reports/...`, `GET /v1/sessions/{id}/feed`): the
/// reports database of `ADTALLY_REPORTS_DATABASE_URL` when one is set (a hot standby, with a small
/// pool of its own, so that billing's queries never load the primary or take ingestion's
/// connections), else the primary's pool.
///
/// A hot standby cancels a query whose rows its replay of the primary's changes must remove or
/// lock (a recovery conflict): such a read is run once more on a fresh connection, and fails if
/// that fails too. The database's reachability is tracked from the reads' outcomes, for
/// `/metrics` and one log line per change: a pod whose reports database is down still counts
/// events, so readiness does not depend on it.
public final class ReadDatabase: Sendable {
    /// The pool reads borrow from.
    public let pool: PostgresPool
    /// True when reads go to a database of their own (`ADTALLY_REPORTS_DATABASE_URL`), which is
    /// normally a standby: what it answers is what it has replayed. Reports use it to read
    /// `final_before` from a replicated table instead of computing it from the primary's state.
    public let isStandby: Bool
    /// The bound on one statement's answer: reports scan a lot, so it is longer than the primary's.
    public let answerTimeout: Duration
    private let logger: Logger
    private let reachability = Mutex(Reachability())

    public struct Reachability: Sendable {
        public var reachable = true
        public var failures: UInt64 = 0
    }

    public init(pool: PostgresPool, isStandby: Bool, answerTimeout: Duration, logger: Logger) {
        self.pool = pool
        self.isStandby = isStandby
        self.answerTimeout = answerTimeout
        self.logger = logger
    }

    /// Whether the last read reached the database, and how many reads failed for want of it.
    public var state: Reachability { reachability.withLock { $0 } }

    /// Runs `body` on a connection of this database; throws the `PostgresError` when the database
    /// cannot be used (which an HTTP answer says as `503`). A recovery conflict, or a session the
    /// standby ended, is retried once.
    public func read<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        do {
            let value = try pool.withConnection(answerTimeout: answerTimeout, retry: Self.retry, body)
            record(reachable: true, error: nil)
            return value
        } catch let error as PostgresError where error.isRecoveryConflict {
            // Both attempts met a recovery conflict: the standby is there. A conflict may also end
            // the session (FATAL, the connection closed: `connectionLost` with the conflict's
            // SQLSTATE), which is not an outage either.
            throw error
        } catch let error as PostgresError where error.isConnectionGone {
            record(reachable: false, error: error)
            throw error
        }
    }

    /// A read runs once more on a fresh connection after a failure `mayRetry` accepts.
    static let retry = RetryPolicy(attempts: 2) { ($0 as? PostgresError).map(mayRetry) ?? false }

    /// A failure that running the read again on another connection may cure: a recovery conflict
    /// (the replay that needed the rows has moved on), or a connection that broke in use (a standby
    /// ends sessions it conflicts with; a failover ends them all). Not a failure to connect, which a
    /// retry at once would only repeat, after another connect timeout.
    static func mayRetry(_ error: PostgresError) -> Bool {
        error.isRecoveryConflict || error.kind == .connectionLost
    }

    /// Keeps the reachability and logs its changes (one line each way, not one per request).
    private func record(reachable: Bool, error: PostgresError?) {
        guard isStandby else { return }
        let changed = reachability.withLock { state -> Bool in
            if !reachable { state.failures += 1 }
            defer { state.reachable = reachable }
            return state.reachable != reachable
        }
        guard changed else { return }
        if reachable {
            logger.info("reports database reachable again")
        } else {
            logger.warning("reports database unreachable: reports and feed reads answer 503; ingestion goes on",
                           [("error", error.map { error in "\(error.kind): \(error.message)" } ?? "")])
        }
    }
}

extension ReadDatabase {
    /// Its reachability, failed reads and pool for `/metrics`; nil when reads share the primary's pool.
    public var ownDatabase: (reachable: Bool, failures: UInt64, pool: PostgresPool)? {
        guard isStandby else { return nil }
        let state = state
        return (state.reachable, state.failures, pool)
    }
}
