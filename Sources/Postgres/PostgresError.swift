/// A failure of the database layer, mapped once from libpq so that callers decide on three questions
/// only: is the connection gone (retry elsewhere, answer `503`), may the transaction simply be run
/// again (a race lost, a plan gone stale), and which constraint or SQLSTATE made the statement fail
/// (turn a unique violation into a domain answer).
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is, from the caller's point of view.
    public enum Kind: Sendable, Equatable {
        /// No connection could be opened (server down, wrong address, bad credentials, timeout).
        case connectionFailed
        /// The connection broke while in use; the statement's outcome is unknown unless it was
        /// inside a transaction that never committed.
        case connectionLost
        /// The server refused a write because it no longer accepts writes (SQLSTATE 25006: a standby
        /// now, after a failover). Nothing of the statement took effect; the connection is dropped
        /// and a new one goes to the primary.
        case serverReadOnly
        /// The server ran the statement and refused it; the connection is still usable.
        case statementFailed
        /// A column was read as a Swift type that its PostgreSQL type cannot become.
        case typeMismatch
        /// No pooled connection became free within the pool's wait.
        case poolTimeout
        /// The pool was shut down.
        case poolClosed
    }

    /// The kind of failure.
    public let kind: Kind
    /// The five-character SQLSTATE, when the server sent one (`23505` for a unique violation).
    public let sqlState: String?
    /// The constraint the server named, for constraint violations.
    public let constraint: String?
    /// The primary message.
    public let message: String
    /// The server's detail line, if any.
    public let detail: String?
    /// The server's source routine that raised the error (`RevalidateCachedQuery`): unlike the
    /// message, it does not depend on the server's `lc_messages`.
    public let routine: String?
    /// Where in this program the failing statement was sent (`EventStore.swift:212`), so that a log
    /// line names the statement, not only the SQLSTATE.
    public internal(set) var location: String?
    /// For a statement refused because its transaction had already failed (`25P02`): the statement
    /// that failed first and why, which is the error that matters.
    public internal(set) var firstFailure: String?

    /// Creates an error; the layer itself builds most of them from libpq results.
    public init(kind: Kind, message: String, sqlState: String? = nil, constraint: String? = nil, detail: String? = nil,
                routine: String? = nil, location: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.constraint = constraint
        self.detail = detail
        self.routine = routine
        self.location = location
    }

    /// True when the database cannot be used right now through this connection (or at all):
    /// the request should be answered `503` and the connection must not be reused.
    public var isConnectionGone: Bool {
        switch kind {
        case .connectionFailed, .connectionLost, .serverReadOnly, .poolTimeout, .poolClosed:
            return true
        case .statementFailed, .typeMismatch:
            return false
        }
    }

    /// A hot standby cancelled the statement (or ended the session) because replaying the
    /// primary's changes needed what it held (SQLSTATE 40001 "conflict with recovery", or 57P04
    /// for a dropped database). Running it again usually succeeds: the conflict has passed.
    public var isRecoveryConflict: Bool {
        sqlState == SQLState.serializationFailure || sqlState == SQLState.databaseDropped
    }

    /// A unique or primary key constraint refused a row.
    public var isUniqueViolation: Bool { sqlState == SQLState.uniqueViolation }
    /// The transaction lost a race (serialization failure or deadlock) and may be run again as a whole.
    public var isSerializationFailure: Bool {
        sqlState == SQLState.serializationFailure || sqlState == SQLState.deadlockDetected
    }
    /// "cached plan must not change result type": a table changed under a prepared statement (an
    /// online migration). Outside a transaction the connection prepares the statement again by
    /// itself; inside one the transaction is lost, and running it again succeeds.
    public var isCachedPlanChanged: Bool {
        sqlState == SQLState.featureNotSupported
            && (routine == "RevalidateCachedQuery" || message.contains("cached plan must not change result type"))
    }
    /// The transaction failed for a reason that running it again on a clean state can cure: a lost
    /// race or a stale plan. Nothing of it was committed.
    public var isTransientTransactionFailure: Bool { isSerializationFailure || isCachedPlanChanged }

    /// A long write given up with nothing of it committed: the database gone, a statement past its
    /// limit (cancelled on the server), or a lost race. The same request may be sent again.
    public var wasGivenUp: Bool {
        isConnectionGone || sqlState == SQLState.queryCanceled || isTransientTransactionFailure
    }

    public var description: String {
        var text = "\(kind): \(message)"
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let constraint { text += " [constraint \(constraint)]" }
        if let detail { text += " detail: \(detail)" }
        if let location { text += " at \(location)" }
        if let firstFailure { text += "; first failure in the transaction: \(firstFailure)" }
        return text
    }

    /// SQLSTATE classes that mean the session is over: 08 (connection exception), 57P01-57P03
    /// (admin shutdown, crash shutdown, cannot connect now).
    static func sqlStateMeansConnectionGone(_ state: String?) -> Bool {
        guard let state else { return false }
        return state.hasPrefix("08") || state == SQLState.adminShutdown || state == SQLState.crashShutdown
            || state == SQLState.cannotConnectNow
    }
}

/// The SQLSTATE codes this program acts on, named once (PostgreSQL's appendix A).
public enum SQLState {
    public static let uniqueViolation = "23505"
    public static let checkViolation = "23514"
    public static let serializationFailure = "40001"
    public static let deadlockDetected = "40P01"
    public static let featureNotSupported = "0A000"
    public static let inFailedTransaction = "25P02"
    public static let readOnlyTransaction = "25006"
    public static let queryCanceled = "57014"
    public static let adminShutdown = "57P01"
    public static let databaseDropped = "57P04"
    public static let crashShutdown = "57P02"
    public static let cannotConnectNow = "57P03"
    public static let lockNotAvailable = "55P03"
}
