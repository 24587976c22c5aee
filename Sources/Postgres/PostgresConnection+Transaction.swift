/// Transactions as a closure: the body's thrown error rolls back, a normal return commits, and only
/// a successful `COMMIT` returns the body's value. That is what lets callers acknowledge only what
/// is durable.
extension PostgresConnection {
    /// Isolation levels PostgreSQL offers.
    public enum IsolationLevel: String, Sendable {
        case readCommitted = "READ COMMITTED"
        case repeatableRead = "REPEATABLE READ"
        case serializable = "SERIALIZABLE"
    }

    /// Runs `body` inside `BEGIN` / `COMMIT`; rolls back and rethrows when it throws.
    public func transaction<T>(isolation: IsolationLevel = .readCommitted, _ body: (PostgresConnection) throws -> T) throws -> T {
        try execute(isolation == .readCommitted ? "BEGIN" : "BEGIN ISOLATION LEVEL \(isolation.rawValue)")
        let value: T
        do {
            value = try body(self)
        } catch {
            // A failed ROLLBACK means the connection is gone; the caller's error is the one that matters.
            _ = try? execute("ROLLBACK")
            throw error
        }
        do {
            try execute("COMMIT")
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
        return value
    }
}
