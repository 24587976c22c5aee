import CLibPQ
import Foundation

/// One libpq connection. libpq connections are not thread-safe, so a connection is used by one
/// thread at a time: the pool hands each to exactly one borrower, which is what makes the
/// `@unchecked Sendable` safe (the type moves between threads, it is never shared by them).
public final class PostgresConnection: @unchecked Sendable {
    var handle: OpaquePointer?
    /// Statement names by SQL text: each distinct query is parsed and planned once per connection
    /// (`PQprepare`), then only executed. The program's SQL texts are constants, so this stays small.
    var preparedStatements: [String: String] = [:]
    /// The number in the next statement's name. It only grows, so a name is never given twice on
    /// one connection, whatever was forgotten or failed before.
    var nextStatementNumber: UInt64 = 1
    /// Prepared statements forgotten while a transaction was open (their plan went stale), to be
    /// deallocated once the connection is idle again: `DEALLOCATE` fails inside a failed transaction.
    var staleStatementNames: [String] = []
    /// The first statement that failed in the current transaction, for the errors that follow it
    /// (`25P02`), which would otherwise hide the cause.
    var firstFailureInTransaction: String?
    /// Set when the connection is in a state this type cannot bring back (a `COPY` in progress, a
    /// protocol answer it does not understand): the pool must close it, not lend it again.
    var stateUnknown = false
    /// Whether statements are prepared once per connection, or sent unnamed with every execution
    /// (for a pooler in transaction mode, where the next transaction may run on another server
    /// connection that never saw the `PREPARE`).
    public let usesPreparedStatements: Bool
    /// When this connection was opened, to let the pool retire old connections if it wants to.
    public let openedAt: Date

    /// How long a statement may go without the server's answer before the connection is given up
    /// (nil: no limit). A server that died resets its connections, but a hung one (a stopped
    /// process, a frozen machine whose kernel still acknowledges packets) does not, and TCP
    /// keepalives cannot see it while its kernel answers them: only this bound gets a borrower off
    /// it. The pool sets it on every connection it lends.
    public var answerTimeout: Duration?

    /// libpq parameters every connection gets unless its connection string sets them: TCP
    /// keepalives and `tcp_user_timeout`, so that a server whose host or network vanished (no reset
    /// ever comes) is noticed within about 10 s, idle or busy. Ignored for Unix sockets.
    public static let keepaliveDefaults: [(String, String)] = [
        ("keepalives", "1"), ("keepalives_idle", "4"), ("keepalives_interval", "1"), ("keepalives_count", "3"),
        ("tcp_user_timeout", "6000"),
    ]

    /// `keepaliveDefaults` plus `target_session_attrs=read-write`: for connections that write.
    /// With several hosts (`host1,host2`), libpq tries them in order and keeps the first that accepts
    /// writes, which is how a process finds the primary after a failover; with one host it refuses
    /// a standby instead of failing later on the first write.
    public static let primaryDefaults: [(String, String)] = keepaliveDefaults + [("target_session_attrs", "read-write")]

    /// Opens a connection from a libpq connection string or URI (`postgres://user@host/db`,
    /// `host=/tmp port=5433 dbname=x`, `postgresql://db1,db2/x?target_session_attrs=read-write`).
    /// `connectTimeout` (which libpq applies to each host in turn) and `parameterDefaults` apply
    /// unless the string sets its own; `parameterOverrides` apply whatever the string sets (a Citus
    /// node's `host` and `port` over `DATABASE_URL`'s). The session runs in UTC so that
    /// `timestamptz` text is unambiguous.
    public init(connectionString: String, connectTimeoutSeconds: Int = 5, applicationName: String = "adtally",
                usePreparedStatements: Bool = true, answerTimeout: Duration? = nil,
                parameterDefaults: [(String, String)] = PostgresConnection.keepaliveDefaults,
                parameterOverrides: [(String, String)] = []) throws {
        // Earlier keywords are overridden by the expanded connection string, so the caller's own
        // connect_timeout, application_name, keepalives... win over these defaults; later ones
        // override it.
        let defaults = [("connect_timeout", String(max(1, connectTimeoutSeconds))), ("application_name", applicationName)]
            + parameterDefaults
        let keywords = defaults.map(\.0) + ["dbname"] + parameterOverrides.map(\.0)
        let values = defaults.map(\.1) + [connectionString] + parameterOverrides.map(\.1)
        let connection: OpaquePointer? = withCStringArray(keywords) { keywordPointers in
            withCStringArray(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        self.openedAt = Date()
        self.usesPreparedStatements = usePreparedStatements
        self.answerTimeout = answerTimeout
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
        // Every wait for the server is a poll with a deadline (`answerTimeout`), never a blocking
        // read or write: a hung server must not hold a thread past it.
        _ = PQsetnonblocking(connection, 1)
        // A session setting, but a safe one behind a pooler in transaction mode: pgbouncer tracks
        // TimeZone per client and sets it on whichever server connection serves the client.
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

    /// False once the connection is closed, libpq has seen it break, a transaction is still open
    /// on it, or it is in a state that cannot be brought back: a pool lends only a connection for
    /// which this is true. A cheap, local check: it reads whatever the server already sent (such
    /// as the notice of `pg_terminate_backend`) without a round trip.
    public var isUsable: Bool {
        guard let handle, !stateUnknown else { return false }
        if PQstatus(handle) != CONNECTION_OK { return false }
        if PQtransactionStatus(handle) != PQTRANS_IDLE { return false }
        _ = PQconsumeInput(handle)
        return PQstatus(handle) == CONNECTION_OK
    }

    /// True when this connection lost its server: closed, broken, given up for want of an answer,
    /// or on a server that no longer accepts writes. The pool then distrusts its other idle
    /// connections too: they were most likely opened to the same server, which is dead, hung or a
    /// standby now, and each would cost a borrower a failure (or a whole `answerTimeout`) to find out.
    public var hasLostItsServer: Bool {
        guard let handle, !stateUnknown else { return true }
        return PQstatus(handle) != CONNECTION_OK
    }

    /// True while a transaction is open on the connection (begun, or failed and not yet rolled back).
    public var isInTransaction: Bool {
        guard let handle else { return false }
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// The server process id of this session (for `pg_terminate_backend` in tests and logs).
    public var backendPID: Int32 {
        guard let handle else { return 0 }
        return PQbackendPID(handle)
    }

    /// Runs one statement with its bound parameters (`PostgresQuery`: every interpolated value is
    /// one), prepared once per connection and executed with `PQexecPrepared` (or sent unnamed with
    /// `PQexecParams` when the connection does not prepare statements). Values are never spliced
    /// into the SQL text. `file` and `line` name the statement in errors and logs.
    ///
    /// When a table changed under a prepared statement ("cached plan must not change result type"),
    /// the statement is prepared again under a new name and run once more, but only outside a
    /// transaction: inside one, the transaction is already lost, and the error (for which
    /// `isTransientTransactionFailure` is true) tells the caller to run it again.
    @discardableResult
    public func query(_ query: PostgresQuery, file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        guard let handle, !stateUnknown else {
            throw PostgresError(kind: .connectionLost, message: "connection is closed", location: query.location ?? Self.location(file, line))
        }
        let sql = query.sql
        let values = query.binds.map(\.postgresParameter)
        let idleBefore = PQtransactionStatus(handle) == PQTRANS_IDLE
        do {
            if idleBefore {
                firstFailureInTransaction = nil
                if !staleStatementNames.isEmpty { try deallocateStaleStatements(on: handle) }
            }
            guard usesPreparedStatements, query.isPrepared else {
                return try exchange(on: handle) {
                    withParameterArrays(values) { pointers, lengths, formats in
                        PQsendQueryParams(handle, sql, Int32(values.count), nil, pointers, lengths, formats, 0)
                    }
                }
            }
            do {
                return try execute(prepared: try preparedName(for: sql, on: handle), values, on: handle)
            } catch let error as PostgresError where error.isCachedPlanChanged {
                forget(sql, deallocateLater: !idleBefore, on: handle)
                guard idleBefore else { throw error }
                return try execute(prepared: try preparedName(for: sql, on: handle), values, on: handle)
            }
        } catch var error as PostgresError {
            annotate(&error, at: query.location ?? Self.location(file, line))
            throw error
        }
    }

    private func execute(prepared name: String, _ values: [PostgresParameter], on handle: OpaquePointer) throws -> PostgresResult {
        try exchange(on: handle) {
            withParameterArrays(values) { pointers, lengths, formats in
                PQsendQueryPrepared(handle, name, Int32(values.count), pointers, lengths, formats, 0)
            }
        }
    }

    private func preparedName(for sql: String, on handle: OpaquePointer) throws -> String {
        if let name = preparedStatements[sql] { return name }
        let name = "adtally_\(nextStatementNumber)"
        nextStatementNumber += 1
        _ = try exchange(on: handle) { PQsendPrepare(handle, name, sql, 0, nil) }
        preparedStatements[sql] = name
        return name
    }

    /// Forgets the prepared statement of `sql`, deallocating it now when the connection is idle,
    /// else once it is.
    func forget(_ sql: String, deallocateLater: Bool, on handle: OpaquePointer) {
        guard let name = preparedStatements.removeValue(forKey: sql) else { return }
        staleStatementNames.append(name)
        if !deallocateLater { try? deallocateStaleStatements(on: handle) }
    }

    /// Deallocates statements forgotten earlier. A name the server no longer knows is not an error
    /// worth keeping; a broken connection is, and is thrown.
    func deallocateStaleStatements(on handle: OpaquePointer) throws {
        let names = staleStatementNames
        staleStatementNames = []
        for name in names {
            do {
                // The name is this type's own ("adtally_" and digits), never a client's value.
                _ = try exchange(on: handle) { PQsendQuery(handle, "DEALLOCATE \(name)") }
            } catch let error as PostgresError where !error.isConnectionGone {
                continue
            }
        }
    }

    /// Runs SQL without parameters, possibly several statements (a migration file), in the simple
    /// protocol: nothing is prepared. A query with parameters goes through `query` instead.
    @discardableResult
    public func execute(_ query: PostgresQuery, file: StaticString = #fileID, line: UInt = #line) throws -> PostgresResult {
        guard query.binds.isEmpty else { return try self.query(query, file: file, line: line) }
        guard let handle, !stateUnknown else {
            throw PostgresError(kind: .connectionLost, message: "connection is closed", location: query.location ?? Self.location(file, line))
        }
        if PQtransactionStatus(handle) == PQTRANS_IDLE { firstFailureInTransaction = nil }
        do {
            return try exchange(on: handle) { PQsendQuery(handle, query.sql) }
        } catch var error as PostgresError {
            annotate(&error, at: query.location ?? Self.location(file, line))
            throw error
        }
    }

    /// Names the statement in `error`, and links a `25P02` to the failure that caused it (or
    /// remembers this failure as the transaction's first).
    func annotate(_ error: inout PostgresError, at location: String) {
        if error.location == nil { error.location = location }
        if error.sqlState == SQLState.inFailedTransaction {
            error.firstFailure = firstFailureInTransaction
        } else if firstFailureInTransaction == nil, let handle, PQtransactionStatus(handle) == PQTRANS_INERROR {
            firstFailureInTransaction = error.description
        }
    }

    static func location(_ file: StaticString, _ line: UInt) -> String {
        let path = "\(file)"
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return "\(name):\(line)"
    }

    func check(_ raw: OpaquePointer?) throws -> PostgresResult {
        guard let raw else {
            throw connectionError(fallback: "no result from server")
        }
        let status = PQresultStatus(raw)
        if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY {
            return PostgresResult(handle: raw)
        }
        if status != PGRES_FATAL_ERROR && status != PGRES_NONFATAL_ERROR {
            // COPY, a pipeline answer or an answer libpq could not parse: this type cannot bring
            // the connection back from there, so it is not lent again.
            PQclear(raw)
            stateUnknown = true
            throw PostgresError(kind: .connectionLost, message: "unexpected answer (\(String(cString: PQresStatus(status)))); connection discarded")
        }
        let error = statementError(raw)
        PQclear(raw)
        throw error
    }

    /// The error a failed result reports (not freed here), as `connectionLost` when it means the
    /// session is over.
    func statementError(_ raw: OpaquePointer) -> PostgresError {
        let field = { (code: Character) -> String? in
            guard let ascii = code.asciiValue, let pointer = PQresultErrorField(raw, Int32(ascii)) else { return nil }
            return String(cString: pointer)
        }
        let sqlState = field("C")
        let message = field("M") ?? Self.trimmed(PQresultErrorMessage(raw))
        if let handle, PQstatus(handle) != CONNECTION_OK || PostgresError.sqlStateMeansConnectionGone(sqlState) {
            return PostgresError(kind: .connectionLost, message: message.isEmpty ? "connection lost" : message, sqlState: sqlState)
        }
        if sqlState == SQLState.readOnlyTransaction {
            // The server no longer takes writes: it is a standby now (a failover happened, or the
            // failover manager fenced it). This connection will never write again, so it is not
            // lent again; a new one finds the primary (target_session_attrs=read-write).
            stateUnknown = true
            return PostgresError(kind: .serverReadOnly, message: message.isEmpty ? "the server does not accept writes" : message,
                                 sqlState: sqlState, routine: field("R"))
        }
        return PostgresError(
            kind: .statementFailed, message: message.isEmpty ? "statement failed" : message,
            sqlState: sqlState, constraint: field("n"), detail: field("D"), routine: field("R")
        )
    }

    func connectionError(fallback: String) -> PostgresError {
        guard let handle else { return PostgresError(kind: .connectionLost, message: fallback) }
        let message = Self.trimmed(PQerrorMessage(handle))
        return PostgresError(kind: .connectionLost, message: message.isEmpty ? fallback : message)
    }

    static func trimmed(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
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
func withParameterArrays<R>(
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
