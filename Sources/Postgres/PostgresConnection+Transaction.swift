/// Transactions, in one place: begin, the body, commit, rollback on every path that did not commit,
/// and the retry of a transaction that a concurrent one got in the way of. Only a successful
/// `COMMIT` returns the body's value, which is what lets callers acknowledge only what is durable.

/// How a transaction begins.
public struct TransactionOptions: Sendable, Equatable {
    /// Isolation levels PostgreSQL offers.
    public enum Isolation: String, Sendable {
        case readCommitted = "READ COMMITTED"
        case repeatableRead = "REPEATABLE READ"
        case serializable = "SERIALIZABLE"
    }

    public var isolation: Isolation
    public var readOnly: Bool

    public init(isolation: Isolation = .readCommitted, readOnly: Bool = false) {
        self.isolation = isolation
        self.readOnly = readOnly
    }

    /// `READ COMMITTED`, read-write: what most transactions want.
    public static let readWrite = TransactionOptions()
    /// `READ COMMITTED`, read-only.
    public static let readOnly = TransactionOptions(readOnly: true)

    /// The statement that opens such a transaction.
    var begin: PostgresQuery {
        switch (isolation, readOnly) {
        case (.readCommitted, false): return "BEGIN"
        case (.readCommitted, true): return "BEGIN READ ONLY"
        case (.repeatableRead, false): return "BEGIN ISOLATION LEVEL REPEATABLE READ"
        case (.repeatableRead, true): return "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        case (.serializable, false): return "BEGIN ISOLATION LEVEL SERIALIZABLE"
        case (.serializable, true): return "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"
        }
    }
}

/// When a failed unit of work (a transaction, a borrow of a connection) runs again: at most
/// `attempts` times in all, and only for an error `mayRunAgain` accepts. Every unit that retries
/// says so with one of these, so the policies can be read side by side.
public struct RetryPolicy: Sendable {
    /// Runs in all, the first included (1: no retry).
    public var attempts: Int
    /// Whether the unit may run again after `error` (it was rolled back as a whole).
    public var mayRunAgain: @Sendable (any Error) -> Bool

    public init(attempts: Int, mayRunAgain: @escaping @Sendable (any Error) -> Bool) {
        self.attempts = max(1, attempts)
        self.mayRunAgain = mayRunAgain
    }

    /// Never again.
    public static let never = RetryPolicy(attempts: 1) { _ in false }

    /// Again after a serialization failure, a deadlock or a plan a migration made stale
    /// (`isTransientTransactionFailure`): the transaction was rolled back and lost nothing.
    public static func transientFailures(attempts: Int) -> RetryPolicy {
        RetryPolicy(attempts: attempts) { ($0 as? PostgresError)?.isTransientTransactionFailure ?? false }
    }

    /// This policy, also running again after an error `also` accepts.
    public func or(_ also: @escaping @Sendable (any Error) -> Bool) -> RetryPolicy {
        let first = mayRunAgain
        return RetryPolicy(attempts: attempts) { first($0) || also($0) }
    }

    /// Runs `body` until it returns, or throws an error this policy does not run again after, or
    /// the attempts are spent, or `isFinal` says the unit must not run again whatever its error
    /// (a transaction that committed). `beforeRetry` runs between attempts (it may throw, which
    /// ends it). The one retry loop: transactions, borrows and the start's connection use it.
    public func run<T>(beforeRetry: (any Error) throws -> Void = { _ in }, isFinal: () -> Bool = { false },
                       _ body: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            do {
                return try body()
            } catch {
                guard attempt < attempts, !isFinal(), mayRunAgain(error) else { throw error }
                try beforeRetry(error)
                attempt += 1
            }
        }
    }
}

/// An open transaction, for the body of `PostgresConnection.withTransaction`. `BEGIN` travels with
/// the first statements and `COMMIT` may travel with the last (`run(_:commit:)`), so that a
/// transaction of three pipelines costs three round trips, not five.
public final class PostgresTransaction {
    private let underlying: PostgresConnection
    private let begin: PostgresQuery?
    private var begun: Bool
    /// Whether `COMMIT` was sent and succeeded (the helper then sends none).
    private(set) var committed = false

    init(connection: PostgresConnection, options: TransactionOptions) {
        self.underlying = connection
        self.begin = options.begin
        self.begun = false
    }

    private init(joining connection: PostgresConnection) {
        self.underlying = connection
        self.begin = nil
        self.begun = true
    }

    /// The transaction the caller opened on `connection` and will end itself: statements run in it,
    /// and neither `BEGIN` nor `COMMIT` is sent (`commit: true` is ignored). For tests that hold a
    /// transaction open to see what it locks.
    public static func joining(_ connection: PostgresConnection) -> PostgresTransaction {
        PostgresTransaction(joining: connection)
    }

    /// The connection, with the transaction begun on it (`BEGIN` is sent now if it has not been):
    /// for code that takes a connection (a migration runner's checks) inside the transaction.
    public func connection() throws -> PostgresConnection {
        try beginIfNeeded()
        return underlying
    }

    private func beginIfNeeded() throws {
        if !begun, let begin { try underlying.execute(begin) }
        begun = true
    }

    /// Runs `pipeline` in the transaction, in one round trip with `BEGIN` if it has not begun yet
    /// and, with `commit: true`, with `COMMIT` after it: the results are returned only once the
    /// commit succeeded.
    public func run(_ pipeline: PostgresPipeline, commit: Bool = false) throws -> PostgresPipelineResults {
        var first: [PostgresQuery] = []
        if !begun, let begin { first.append(begin) }
        let commits = commit && self.begin != nil
        var statements = pipeline
        if commits { statements.add("COMMIT") }
        begun = true
        let results = try underlying.run(statements, after: first)
        if commits { committed = true }
        return results
    }

    /// One statement in the transaction (with `BEGIN`, when it has not begun yet).
    @discardableResult
    public func query(_ query: PostgresQuery, file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        var pipeline = PostgresPipeline()
        let result = pipeline.add(query, file: file, line: line)
        return try run(pipeline)[result]
    }

    /// Text without parameters in the transaction, possibly several statements, in the simple
    /// protocol (`PostgresConnection.execute`): a migration's DDL.
    @discardableResult
    public func execute(_ query: PostgresQuery, file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        try beginIfNeeded()
        return try underlying.execute(query, file: file, line: line)
    }

    /// Ends the transaction with `COMMIT` if it began and has not committed.
    func commitIfOpen() throws {
        guard begun, !committed, begin != nil else { return }
        try underlying.execute("COMMIT")
        committed = true
    }
}

extension PostgresConnection {
    /// Runs `body` in a transaction: `BEGIN` goes with its first statements, `COMMIT` follows its
    /// return (or went with its last pipeline, `PostgresTransaction.run(_:commit:)`), and any
    /// error rolls the transaction back (a failed `ROLLBACK` means the connection is gone, and the
    /// body's error is the one that matters). When `retry` accepts the error, `beforeRetry` runs
    /// and the whole transaction runs again, up to the policy's attempts: only a successful
    /// `COMMIT` returns a value.
    public func withTransaction<T>(_ options: TransactionOptions = .readWrite, retry: RetryPolicy = .never,
                                   beforeRetry: (any Error) throws -> Void = { _ in },
                                   _ body: (PostgresTransaction) throws -> T) throws -> T {
        let last = LastTransaction()
        // What committed is never run again, whatever failed after the commit.
        return try retry.run(beforeRetry: beforeRetry, isFinal: { last.committed }) {
            let transaction = PostgresTransaction(connection: self, options: options)
            last.transaction = transaction
            do {
                let value = try body(transaction)
                try transaction.commitIfOpen()
                return value
            } catch {
                if isInTransaction { _ = try? execute("ROLLBACK") }
                throw error
            }
        }
    }
}

/// The transaction of the latest attempt, for `withTransaction`'s retry to ask whether it committed.
private final class LastTransaction {
    var transaction: PostgresTransaction?
    var committed: Bool { transaction?.committed ?? false }
}
