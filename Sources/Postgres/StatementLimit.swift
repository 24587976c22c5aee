/// The bound on each statement of long work (maintenance, a credit, an erasure): PostgreSQL gives
/// the statement up after `timeout` and cancels it on the server (`statement_timeout`), and the
/// connection waits `answerMargin` longer for an answer before it gives up itself (a server that
/// stopped answering), so that a statement past its limit ends on the server's terms first.
public struct StatementLimit: Sendable, Equatable {
    /// How much longer than a statement may run the connection waits for its answer.
    public static let answerMargin: Duration = .seconds(30)

    /// How long one statement may run, at least a second.
    public let timeout: Duration

    public init(_ timeout: Duration) {
        self.timeout = max(timeout, .seconds(1))
    }

    /// How long the connection waits for a statement's answer.
    public var answerTimeout: Duration { timeout + Self.answerMargin }

    /// `statement_timeout` as PostgreSQL reads it (`300s`).
    public var setting: String { "\(timeout.components.seconds)s" }

    /// The statement that limits every later statement of the transaction: `statement_timeout`
    /// set locally, so that it ends with the transaction.
    public var forTransaction: PostgresQuery { .statementTimeout(setting) }
}
