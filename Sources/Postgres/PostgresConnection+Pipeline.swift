import CLibPQ
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Statements to send in one round trip (`PostgresConnection.run`), each added with a handle that
/// reads its own result afterwards, so that no caller counts positions in a list of results:
///
///     var pipeline = PostgresPipeline()
///     let sessions = pipeline.add(lockSessions) { try $0.rows.map(SessionRow.init) }
///     pipeline.add("COMMIT")
///     let results = try connection.run(pipeline)
///     let rows = try results[sessions]
public struct PostgresPipeline {
    /// The statements, in the order they are sent.
    public private(set) var queries: [PostgresQuery] = []
    /// Tells this pipeline's handles from another's (a handle used with the wrong results is a
    /// programmer error, caught in debug builds).
    let identity = PipelineIdentity()

    public init() {}

    /// The result of one statement of a pipeline, decoded as `Value`.
    public struct Handle<Value> {
        let index: Int
        let identity: PipelineIdentity
        let decode: (PostgresResult) throws -> Value
    }

    /// Adds a statement whose result is read through the returned handle, decoded by `decode`.
    @discardableResult
    public mutating func add<Value>(_ query: PostgresQuery, file: StaticString = #fileID, line: UInt = #line,
                                    decoding decode: @escaping (PostgresResult) throws -> Value) -> Handle<Value> {
        queries.append(query.located(file, line))
        return Handle(index: queries.count - 1, identity: identity, decode: decode)
    }

    /// Adds a statement whose result, if read at all, is read whole.
    @discardableResult
    public mutating func add(_ query: PostgresQuery, file: StaticString = #fileID, line: UInt = #line) -> Handle<PostgresResult> {
        add(query, file: file, line: line) { $0 }
    }

    public var isEmpty: Bool { queries.isEmpty }
}

/// A pipeline's identity, compared by reference.
final class PipelineIdentity: Sendable {}

/// What a pipeline's statements returned, read by their handles.
public struct PostgresPipelineResults {
    let results: [PostgresResult]
    let identity: PipelineIdentity

    /// The result of the statement of `handle`, decoded.
    public subscript<Value>(handle: PostgresPipeline.Handle<Value>) -> Value {
        get throws {
            // Handles come from the pipeline these results answer: a mix-up is a programmer error.
            assert(handle.identity === identity, "a handle read from another pipeline's results")
            let index = handle.index
            guard results.indices.contains(index) else {
                throw PostgresError(kind: .typeMismatch, message: "no result for statement \(handle.index) of the pipeline")
            }
            return try handle.decode(results[index])
        }
    }
}

extension PostgresConnection {
    /// Sends `statements` in one round trip (libpq's pipeline mode) and returns one result each, in
    /// order. The server runs them one after another, exactly as if they had been sent one at a
    /// time: each sees what the ones before it did and, under `READ COMMITTED`, takes its own
    /// snapshot when it starts. What is saved is the wait for each answer before sending the next.
    ///
    /// When one fails, those after it are not run, and its error is thrown once every answer has
    /// been read. Inside a transaction the failure aborts it, as any failed statement does; outside
    /// one, the statements form one implicit transaction (the protocol's: until the pipeline's sync
    /// point), so none of them took effect. A stale plan is therefore never retried here: the error
    /// (`isTransientTransactionFailure`) tells the caller to run the whole unit again.
    public func run(_ pipeline: PostgresPipeline) throws -> PostgresPipelineResults {
        PostgresPipelineResults(results: try send(pipeline.queries), identity: pipeline.identity)
    }

    /// `run` with `first` sent before the pipeline's own statements, in the same round trip.
    func run(_ pipeline: PostgresPipeline, after first: [PostgresQuery]) throws -> PostgresPipelineResults {
        PostgresPipelineResults(results: try send(first + pipeline.queries).dropFirst(first.count).map { $0 }, identity: pipeline.identity)
    }

    /// Sends `statements` in one round trip and returns one result each, in order.
    func send(_ statements: [PostgresQuery]) throws -> [PostgresResult] {
        guard let handle, !stateUnknown else {
            throw PostgresError(kind: .connectionLost, message: "connection is closed", location: statements.first?.location ?? "pipeline")
        }
        if statements.isEmpty { return [] }
        if PQtransactionStatus(handle) == PQTRANS_IDLE {
            firstFailureInTransaction = nil
            if !staleStatementNames.isEmpty { try deallocateStaleStatements(on: handle) }
        }
        guard PQenterPipelineMode(handle) == 1 else {
            throw PostgresError(kind: .statementFailed, message: "cannot enter pipeline mode: \(Self.trimmed(PQerrorMessage(handle)))",
                                location: statements.first?.location ?? "pipeline")
        }
        // From here on, any failure that leaves the protocol state in doubt marks the connection
        // so that it is never lent again.
        var preparing: [String?] = []  // per statement: the name being prepared in this pipeline
        preparing.reserveCapacity(statements.count)
        let deadline = answerDeadline()
        do {
            for statement in statements {
                let values = statement.binds.map(\.postgresParameter)
                var name: String?
                var newName: String?
                if usesPreparedStatements, statement.isPrepared {
                    if let known = preparedStatements[statement.sql] {
                        name = known
                    } else {
                        let fresh = "adtally_\(nextStatementNumber)"
                        nextStatementNumber += 1
                        guard PQsendPrepare(handle, fresh, statement.sql, 0, nil) == 1 else { throw sendError(statement) }
                        name = fresh
                        newName = fresh
                    }
                }
                preparing.append(newName)
                let sent: Int32 = withParameterArrays(values) { pointers, lengths, formats in
                    if let name {
                        return PQsendQueryPrepared(handle, name, Int32(values.count), pointers, lengths, formats, 0)
                    }
                    return PQsendQueryParams(handle, statement.sql, Int32(values.count), nil, pointers, lengths, formats, 0)
                }
                guard sent == 1 else { throw sendError(statement) }
            }
            guard PQpipelineSync(handle) == 1 else { throw sendError(statements[statements.count - 1]) }
            try flush(handle, until: deadline)
        } catch {
            stateUnknown = true
            throw error
        }

        var results: [PostgresResult] = []
        results.reserveCapacity(statements.count)
        var failure: (error: PostgresError, statement: Int)?
        for (index, statement) in statements.enumerated() {
            if let name = preparing[index] {
                switch try nextCommandResult(handle, statement, until: deadline) {
                case .success(let result):
                    _ = result
                    preparedStatements[statement.sql] = name
                case .failure(let error):
                    if failure == nil { failure = (error, index) }
                case .notRun:
                    break
                }
            }
            switch try nextCommandResult(handle, statement, until: deadline) {
            case .success(let result):
                results.append(result)
            case .failure(let error):
                if failure == nil { failure = (error, index) }
            case .notRun:
                break
            }
        }
        try awaitSync(handle, statements[statements.count - 1], until: deadline)
        guard PQexitPipelineMode(handle) == 1 else {
            stateUnknown = true
            throw PostgresError(kind: .connectionLost, message: "cannot leave pipeline mode: \(Self.trimmed(PQerrorMessage(handle)))",
                                location: statements[statements.count - 1].location ?? "pipeline")
        }
        if let failure {
            var error = failure.error
            let index = failure.statement
            if error.isCachedPlanChanged {
                forget(statements[index].sql, deallocateLater: PQtransactionStatus(handle) != PQTRANS_IDLE, on: handle)
            }
            annotate(&error, at: statements[index].location ?? "pipeline")
            throw error
        }
        return results
    }

    private enum CommandResult {
        case success(PostgresResult)
        case failure(PostgresError)
        /// Skipped because an earlier statement of the pipeline failed.
        case notRun
    }

    /// The next result of the pipeline; a connection that has none to give (`missing` says what was
    /// awaited) is left in a state this layer cannot bring back.
    private func nextResult(_ handle: OpaquePointer, _ statement: PostgresQuery, until deadline: ContinuousClock.Instant?,
                            orElse missing: String) throws -> OpaquePointer {
        try awaitResultAnnotated(handle, statement, until: deadline)
        guard let raw = PQgetResult(handle) else {
            stateUnknown = true
            var error = connectionError(fallback: missing)
            annotate(&error, at: statement.location ?? "pipeline")
            throw error
        }
        return raw
    }

    /// The result of the next command of the pipeline, and the end-of-command marker after it.
    private func nextCommandResult(_ handle: OpaquePointer, _ statement: PostgresQuery,
                                   until deadline: ContinuousClock.Instant?) throws -> CommandResult {
        let raw = try nextResult(handle, statement, until: deadline, orElse: "no result from server in pipeline")
        let status = PQresultStatus(raw)
        let outcome: CommandResult
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            outcome = .success(PostgresResult(handle: raw))
        case PGRES_PIPELINE_ABORTED:
            PQclear(raw)
            outcome = .notRun
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
            let error = statementError(raw)
            PQclear(raw)
            if error.kind == .connectionLost {
                stateUnknown = true
                var lost = error
                annotate(&lost, at: statement.location ?? "pipeline")
                throw lost
            }
            outcome = .failure(error)
        default:
            PQclear(raw)
            stateUnknown = true
            throw PostgresError(kind: .connectionLost, message: "unexpected answer (\(String(cString: PQresStatus(status)))) in pipeline; connection discarded",
                                location: statement.location ?? "pipeline")
        }
        // Each command's results end with a NULL.
        try awaitResultAnnotated(handle, statement, until: deadline)
        if let extra = PQgetResult(handle) {
            PQclear(extra)
            stateUnknown = true
            throw PostgresError(kind: .connectionLost, message: "more results than expected in pipeline; connection discarded",
                                location: statement.location ?? "pipeline")
        }
        return outcome
    }

    /// Reads up to the pipeline's sync point.
    private func awaitSync(_ handle: OpaquePointer, _ statement: PostgresQuery, until deadline: ContinuousClock.Instant?) throws {
        while true {
            let raw = try nextResult(handle, statement, until: deadline, orElse: "pipeline ended without its sync point")
            let status = PQresultStatus(raw)
            PQclear(raw)
            if status == PGRES_PIPELINE_SYNC { return }
        }
    }

    /// `awaitResult`, naming the statement when the wait fails.
    private func awaitResultAnnotated(_ handle: OpaquePointer, _ statement: PostgresQuery,
                                      until deadline: ContinuousClock.Instant?) throws {
        do {
            try awaitResult(handle, until: deadline)
        } catch var error as PostgresError {
            annotate(&error, at: statement.location ?? "pipeline")
            throw error
        }
    }

    private func sendError(_ statement: PostgresQuery) -> PostgresError {
        var error = connectionError(fallback: "could not send the pipeline")
        annotate(&error, at: statement.location ?? "pipeline")
        return error
    }
}
