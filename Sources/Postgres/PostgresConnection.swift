import CLibPQ
import Foundation

/// One libpq connection. libpq connections are not thread-safe, so a connection is used by one
/// thread at a time: the pool hands each to exactly one borrower, which is what makes the
/// `@unchecked Sendable` safe (the type moves between threads, it is never shared by them).
public final class PostgresConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    /// Statement names by SQL text: each distinct query is parsed and planned once per connection
    /// (`PQprepare`), then only executed. The program's SQL texts are constants, so this stays small.
    private var preparedStatements: [String: String] = [:]
    /// When this connection was opened, to let the pool retire old connections if it wants to.
    public let openedAt: Date

    /// Opens a connection from a libpq connection string or URI (`postgres://user@host/db`,
    /// `host=/tmp port=5433 dbname=x`). `connectTimeout` applies unless the string sets its own
    /// `connect_timeout`. The session runs in UTC so that `timestamptz` text is unambiguous.
    public init(connectionString: String, connectTimeoutSeconds: Int = 5, applicationName: String = "adtally") throws {
        // Earlier keywords are overridden by the expanded connection string, so the caller's own
        // connect_timeout or application_name wins over these defaults.
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = [String(max(1, connectTimeoutSeconds)), applicationName, connectionString]
        let connection: OpaquePointer? = withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        self.openedAt = Date()
        guard let connection else {
            throw PostgresError(kind: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(kind: .connectionFailed, message: message.isEmpty ? "connection failed" : message)
        }
        self.handle = connection
        // Notices (such as "relation already exists, skipping") are not errors; libpq's default
        // prints them on stderr, which would break one-JSON-object-per-line logs.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        try execute("SET TimeZone TO 'UTC'")
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Closes the connection now; later use throws `connectionLost`. Safe to call twice.
    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
    }

    /// False once the connection is closed or libpq has seen it break. A cheap, local check: it
    /// reads whatever the server already sent (such as the notice of `pg_terminate_backend`)
    /// without a round trip.
    public var isUsable: Bool {
        guard let handle else { return false }
        if PQstatus(handle) != CONNECTION_OK { return false }
        if PQtransactionStatus(handle) != PQTRANS_IDLE { return false }
        _ = PQconsumeInput(handle)
        return PQstatus(handle) == CONNECTION_OK
    }

    /// The server process id of this session (for `pg_terminate_backend` in tests and logs).
    public var backendPID: Int32 {
        guard let handle else { return 0 }
        return PQbackendPID(handle)
    }

    /// Runs one statement with bound parameters (`$1`, `$2`, ...), prepared once per connection and
    /// executed with `PQexecPrepared`. Values are never spliced into the SQL text.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresBindable] = []) throws -> PostgresResult {
        guard let handle else {
            throw PostgresError(kind: .connectionLost, message: "connection is closed")
        }
        let values = parameters.map(\.postgresParameter)
        let name = try preparedName(for: sql, on: handle)
        do {
            return try execute(prepared: name, values, on: handle)
        } catch let error as PostgresError where error.sqlState == "0A000" {
            // "cached plan must not change result type": a migration changed a table under a
            // prepared statement. Prepare it again, once.
            _ = try? execute("DEALLOCATE \(name)")
            preparedStatements[sql] = nil
            return try execute(prepared: try preparedName(for: sql, on: handle), values, on: handle)
        }
    }

    private func execute(prepared name: String, _ values: [PostgresParameter], on handle: OpaquePointer) throws -> PostgresResult {
        let raw: OpaquePointer? = withParameterArrays(values) { pointers, lengths, formats in
            PQexecPrepared(handle, name, Int32(values.count), pointers, lengths, formats, 0)
        }
        return try check(raw)
    }

    private func preparedName(for sql: String, on handle: OpaquePointer) throws -> String {
        if let name = preparedStatements[sql] { return name }
        let name = "adtally_\(preparedStatements.count + 1)"
        _ = try check(PQprepare(handle, name, sql, 0, nil))
        preparedStatements[sql] = name
        return name
    }

    /// Runs SQL without parameters, possibly several statements (a migration file). Only for text
    /// that this program owns; client values always go through `query(_:_:)`.
    @discardableResult
    public func execute(_ sql: String) throws -> PostgresResult {
        guard let handle else {
            throw PostgresError(kind: .connectionLost, message: "connection is closed")
        }
        return try check(PQexec(handle, sql))
    }

    private func check(_ raw: OpaquePointer?) throws -> PostgresResult {
        guard let raw else {
            throw connectionError(fallback: "no result from server")
        }
        let status = PQresultStatus(raw)
        if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY {
            return PostgresResult(handle: raw)
        }
        let field = { (code: Character) -> String? in
            guard let ascii = code.asciiValue, let pointer = PQresultErrorField(raw, Int32(ascii)) else { return nil }
            return String(cString: pointer)
        }
        let sqlState = field("C")
        let message = field("M") ?? Self.trimmed(PQresultErrorMessage(raw))
        let error = PostgresError(
            kind: .statementFailed, message: message.isEmpty ? "statement failed" : message,
            sqlState: sqlState, constraint: field("n"), detail: field("D")
        )
        PQclear(raw)
        if let handle, PQstatus(handle) != CONNECTION_OK || PostgresError.sqlStateMeansConnectionGone(sqlState) {
            throw PostgresError(kind: .connectionLost, message: error.message, sqlState: sqlState)
        }
        throw error
    }

    private func connectionError(fallback: String) -> PostgresError {
        guard let handle else { return PostgresError(kind: .connectionLost, message: fallback) }
        let message = Self.trimmed(PQerrorMessage(handle))
        return PostgresError(kind: .connectionLost, message: message.isEmpty ? fallback : message)
    }

    private static func trimmed(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Calls `body` with a NULL-terminated array of C strings that live for the call.
private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { buffer in
        // A non-empty array's base address is never nil; the array above has at least the terminator.
        body(buffer.baseAddress!)
    }
}

/// Calls `body` with the three parallel arrays `PQexecPrepared` takes: value pointers (a NULL
/// pointer is SQL NULL; text values NUL-terminated), byte lengths (read for binary values only) and
/// formats (0 text, 1 binary). The values are copied into memory that lives for the call.
private func withParameterArrays<R>(
    _ values: [PostgresParameter],
    _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
) -> R {
    var copies: [UnsafeMutablePointer<CChar>?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    copies.reserveCapacity(values.count)
    for value in values {
        switch value {
        case .text(let text):
            copies.append(text.flatMap { strdup($0) })
            lengths.append(0)
            formats.append(0)
        case .binary(let bytes):
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, bytes.count))
            bytes.withUnsafeBufferPointer { source in
                source.withMemoryRebound(to: CChar.self) { copy.update(from: $0.baseAddress ?? UnsafePointer(copy), count: $0.count) }
            }
            copies.append(copy)
            lengths.append(Int32(truncatingIfNeeded: bytes.count))
            formats.append(1)
        }
    }
    defer {
        for (copy, value) in zip(copies, values) {
            if case .binary = value { copy?.deallocate() } else { free(copy) }
        }
    }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
    return pointers.withUnsafeBufferPointer { pointerBuffer in
        lengths.withUnsafeBufferPointer { lengthBuffer in
            formats.withUnsafeBufferPointer { formatBuffer in
                body(pointerBuffer.baseAddress, lengthBuffer.baseAddress, formatBuffer.baseAddress)
            }
        }
    }
}
