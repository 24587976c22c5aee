/// A failure of the database layer, mapped once from libpq so that callers decide on two questions
/// only: is the connection gone (retry elsewhere, answer `503`), and which constraint or SQLSTATE
/// made the statement fail (turn a unique violation into a domain answer).
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure this is, from the caller's point of view.
    public enum Kind: Sendable, Equatable {
        /// No connection could be opened (server down, wrong address, bad credentials, timeout).
        case connectionFailed
        /// The connection broke while in use; the statement's outcome is unknown unless it was
        /// inside a transaction that never committed.
        case connectionLost
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

    /// Creates an error; the layer itself builds most of them from libpq results.
    public init(kind: Kind, message: String, sqlState: String? = nil, constraint: String? = nil, detail: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.constraint = constraint
        self.detail = detail
    }

    /// True when the database cannot be used right now through this connection (or at all):
    /// the request should be answered `503` and the connection must not be reused.
    public var isConnectionGone: Bool {
        switch kind {
        case .connectionFailed, .connectionLost, .poolTimeout, .poolClosed:
            return true
        case .statementFailed, .typeMismatch:
            return false
        }
    }

    /// SQLSTATE 23505: a unique or primary key constraint refused a row.
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// SQLSTATE 40001 or 40P01: the transaction lost a race and may be retried as a whole.
    public var isSerializationFailure: Bool { sqlState == "40001" || sqlState == "40P01" }

    public var description: String {
        var text = "\(kind): \(message)"
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let constraint { text += " [constraint \(constraint)]" }
        if let detail { text += " detail: \(detail)" }
        return text
    }

    /// SQLSTATE classes that mean the session is over: 08 (connection exception), 57P01-57P03
    /// (admin shutdown, crash shutdown, cannot connect now).
    static func sqlStateMeansConnectionGone(_ state: String?) -> Bool {
        guard let state else { return false }
        return state.hasPrefix("08") || state == "57P01" || state == "57P02" || state == "57P03"
    }
}
