import CLibPQ
import Foundation

/// The rows of one statement. It owns its `PGresult` and frees it once; libpq documents a result as
/// read-only after it is returned, which is what makes sharing it across threads safe.
public final class PostgresResult: @unchecked Sendable {
    @usableFromInline let handle: OpaquePointer
    /// Number of rows returned.
    public let rowCount: Int
    /// Number of columns per row.
    public let columnCount: Int
    /// Column names, in order.
    public let columnNames: [String]
    /// Rows affected for `INSERT`/`UPDATE`/`DELETE` (from the command tag), 0 otherwise.
    public let affectedRows: Int

    init(handle: OpaquePointer) {
        self.handle = handle
        self.rowCount = Int(PQntuples(handle))
        self.columnCount = Int(PQnfields(handle))
        var names: [String] = []
        for column in 0..<Int32(PQnfields(handle)) {
            names.append(PQfname(handle, column).map { String(cString: $0) } ?? "")
        }
        self.columnNames = names
        self.affectedRows = PQcmdTuples(handle).flatMap { Int(String(cString: $0)) } ?? 0
    }

    deinit {
        PQclear(handle)
    }

    /// The rows, for `for row in result.rows`.
    public var rows: [PostgresRow] {
        (0..<rowCount).map { PostgresRow(result: self, index: $0) }
    }

    /// The first row, if any.
    public var first: PostgresRow? {
        rowCount > 0 ? PostgresRow(result: self, index: 0) : nil
    }

    /// The index of a named column, or nil.
    public func columnIndex(named name: String) -> Int? {
        columnNames.firstIndex(of: name)
    }

    @usableFromInline func isNull(row: Int, column: Int) -> Bool {
        PQgetisnull(handle, Int32(row), Int32(column)) == 1
    }

    @usableFromInline func text(row: Int, column: Int) -> String {
        guard let pointer = PQgetvalue(handle, Int32(row), Int32(column)) else { return "" }
        return String(cString: pointer)
    }

    /// A column's text as libpq holds it, valid only inside `body` (the result owns the memory).
    @usableFromInline func withBytes<T>(row: Int, column: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        guard let pointer = PQgetvalue(handle, Int32(row), Int32(column)) else { return try body(UnsafeBufferPointer(start: nil, count: 0)) }
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        return try pointer.withMemoryRebound(to: UInt8.self, capacity: max(length, 1)) {
            try body(UnsafeBufferPointer(start: $0, count: length))
        }
    }

    @usableFromInline func typeOID(column: Int) -> UInt32 {
        UInt32(PQftype(handle, Int32(column)))
    }
}

/// One row of a result. Reads are typed: asking for a column as a type its PostgreSQL type cannot
/// become throws `typeMismatch` naming the column, rather than guessing.
public struct PostgresRow: Sendable {
    @usableFromInline let result: PostgresResult
    @usableFromInline let index: Int

    /// Decodes column `column` (by position) as `T`; `nil` for SQL `NULL` when `T` is optional.
    /// Inlinable so that callers get a copy specialised for `T`: a batch decodes thousands of
    /// columns, and the generic call looked up `T`'s metadata at run time for each.
    @inlinable
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws -> T {
        guard column >= 0, column < result.columnCount else {
            throw PostgresError(kind: .typeMismatch, message: "column index \(column) out of range (\(result.columnCount) columns)")
        }
        let name = result.columnNames[column]
        let oid = result.typeOID(column: column)
        if result.isNull(row: index, column: column) {
            guard let value = T.postgresNull else {
                throw PostgresError(kind: .typeMismatch, message: "column \(name) is NULL but was read as non-optional \(T.self)")
            }
            return value
        }
        return try result.withBytes(row: index, column: column) { try T.decode(postgresBytes: $0, typeOID: oid, column: name) }
    }

    /// Decodes a column by name.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, named name: String) throws -> T {
        guard let column = result.columnIndex(named: name) else {
            throw PostgresError(kind: .typeMismatch, message: "no column named \(name)")
        }
        return try decode(type, at: column)
    }

    /// The raw text of a column whatever its type, nil for NULL (for diagnostics and `EXPLAIN`).
    public func rawText(at column: Int) -> String? {
        guard column >= 0, column < result.columnCount, !result.isNull(row: index, column: column) else { return nil }
        return result.text(row: index, column: column)
    }
}

extension PostgresRow {
    /// The row's columns, read one after another in the order of the statement's select list: a
    /// row type that owns both its select list and its decoding reads itself with this, so that
    /// no caller counts column offsets.
    @inlinable
    public func columns() -> PostgresColumns { PostgresColumns(row: self) }
}

/// A reader of one row's columns in order (see `PostgresRow.columns()`).
public struct PostgresColumns {
    @usableFromInline let row: PostgresRow
    @usableFromInline var index = 0

    @inlinable
    init(row: PostgresRow) {
        self.row = row
    }

    /// The next column as `T`.
    @inlinable
    public mutating func next<T: PostgresDecodable>(_ type: T.Type = T.self) throws -> T {
        let value = try row.decode(type, at: index)
        index += 1
        return value
    }
}
