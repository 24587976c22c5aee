import Postgres

/// The rows of one query streamed in batches from a server-side cursor, inside one read-only
/// repeatable-read transaction (every batch from the same snapshot): what the listing and the
/// events export share. Memory holds one batch at a time.
///
/// A transaction lost before the first batch was handed on (a plan that a migration made stale) is
/// run once more; after that, the rows already sent cannot be taken back, and the error ends the
/// stream.
enum CursorStream {
    /// `prepare` runs first in the transaction (its settings, what the query needs to be built) and
    /// returns the query and how to read one of its rows; `body` gets each batch of `fetchSize`
    /// rows and may throw to stop early (the client left, or its deadline passed).
    static func run<Row>(on connection: PostgresConnection, fetchSize: Int,
                         prepare: (PostgresTransaction) throws -> (query: PostgresQuery, decode: (PostgresRow) throws -> Row),
                         _ body: ([Row]) throws -> Void) throws {
        do {
            try connection.withTransaction(TransactionOptions(isolation: .repeatableRead, readOnly: true),
                                           retry: .transientFailures(attempts: 2)) { transaction in
                var delivered = false
                do {
                    let (query, decode) = try prepare(transaction)
                    try transaction.query("DECLARE streamed_rows NO SCROLL CURSOR FOR \(query)")
                    while true {
                        let result = try transaction.query("FETCH FORWARD \(integerLiteral: fetchSize) FROM streamed_rows")
                        var rows: [Row] = []
                        rows.reserveCapacity(result.rowCount)
                        for row in result.rows { rows.append(try decode(row)) }
                        if !rows.isEmpty {
                            delivered = true
                            try body(rows)
                        }
                        if result.rowCount < fetchSize { break }
                    }
                    try transaction.query("CLOSE streamed_rows")
                } catch where delivered {
                    // Rows already sent cannot be taken back: no second run.
                    throw AfterDelivery(error: error)
                }
            }
        } catch let interrupted as AfterDelivery {
            throw interrupted.error
        }
    }

    /// A failure after rows were handed on, which the transaction's retry must not run again.
    private struct AfterDelivery: Error {
        let error: any Error
    }
}
