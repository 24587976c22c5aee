import Postgres

/// Tests write their fixtures and checks as plain SQL with numbered parameters (`$1`), as a person
/// would type them into psql. Product code cannot: it has no access to this module and builds every
/// statement by interpolation (`PostgresQuery`).
extension PostgresConnection {
    /// `sql` as it is, with `parameters` bound to `$1`, `$2`, ...
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresBindable] = [], file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        try query(PostgresQuery(unsafeRawSQL: sql, binds: parameters), file: file, line: line)
    }

    /// `sql` as it is, possibly several statements, without parameters.
    @discardableResult
    public func execute(_ sql: String, file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        try execute(PostgresQuery(unsafeRawSQL: sql), file: file, line: line)
    }
}

extension PostgresTransaction {
    /// `sql` as it is, with `parameters` bound to `$1`, `$2`, ..., in the transaction.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresBindable] = [], file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        try query(PostgresQuery(unsafeRawSQL: sql, binds: parameters), file: file, line: line)
    }

    /// `sql` as it is, possibly several statements, without parameters, in the transaction.
    @discardableResult
    public func execute(_ sql: String, file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        try execute(PostgresQuery(unsafeRawSQL: sql), file: file, line: line)
    }
}
