import Dispatch
import HTTP
import HTTPServer
import JSON
import Postgres
import Synchronization

/// `GET /healthz` and `GET /readyz` (API.md section 4). Liveness never touches the database;
/// readiness asks the primary, with a short statement timeout and a short bound on the answer so
/// that a hung database cannot hang the probe. A server that does not accept writes (a standby a
/// connection still points at) is not ready either. The reports database is not asked: a pod that
/// cannot report can still count.
///
/// `/readyz` is public and unlimited (API.md section 6), so a flood of it must cost neither the
/// committers' connections nor the worker threads: probes that arrive while one is under way wait
/// for its answer (`.deferred`, no thread held) instead of asking the database again, and the one
/// probe at a time borrows a shared connection of the pool (the committers' are held back).
public final class HealthRoutes: Sendable {
    let pool: PostgresPool
    let migrations: MigrationRunner
    /// The requests waiting for the probe under way; nil when none is.
    private let waiting = Mutex<[HTTPResponder]?>(nil)
    private let probes = DispatchQueue(label: "adtally.readiness", qos: .userInitiated)

    public init(pool: PostgresPool, migrations: MigrationRunner) {
        self.pool = pool
        self.migrations = migrations
    }

    public func register(on edge: inout Edge) {
        Self.registerLiveness(on: &edge)
        edge.add(.get, "/readyz", .probe) { [self] _ in .deferred { [self] _, responder in answer(responder) } }
    }

    /// `GET /healthz`: the process answers, nothing more. Also the whole router of the server alone
    /// (`Server.runHealthzOnly`, for `scripts/bench-http`).
    public static func registerLiveness(on edge: inout Edge) {
        edge.add(.get, "/healthz", .probe) { _ in .inline { _ in .json(.ok, #"{"status":"ok"}"#) } }
    }

    /// Answers with the probe under way, or starts one (on a queue of its own: it blocks in libpq).
    func answer(_ responder: HTTPResponder) {
        let start = waiting.withLock { waiting -> Bool in
            guard waiting != nil else {
                waiting = [responder]
                return true
            }
            waiting?.append(responder)
            return false
        }
        guard start else { return }
        probes.async { [self] in
            let response: HTTPResponse
            do {
                response = try readiness()
            } catch {
                response = ErrorBody.api.answer(error).response
            }
            let answered = waiting.withLock { waiting -> [HTTPResponder] in
                defer { waiting = nil }
                return waiting ?? []
            }
            for responder in answered { responder.respond(response) }
        }
    }

    func readiness() throws -> HTTPResponse {
        let reason: String?
        do {
            let (readOnly, pending) = try pool.withConnection(answerTimeout: .seconds(3)) { connection in
                // SET LOCAL, in a transaction: a session-level SET would stay behind on whichever
                // server connection a pooler in transaction mode gave this statement.
                try connection.withTransaction { transaction -> (Bool, [Int]) in
                    try transaction.execute("SET LOCAL statement_timeout = 2000")
                    let readOnly = try transaction.query(
                        "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'"
                    ).first?.decode(Bool.self, at: 0) ?? true
                    return (readOnly, try migrations.pendingVersions(on: try transaction.connection()))
                }
            }
            if readOnly {
                reason = "database unavailable: the server does not accept writes (not the primary)"
            } else {
                reason = pending.isEmpty ? nil : "migrations pending: \(pending.map(String.init).joined(separator: ","))"
            }
        } catch let error as PostgresError {
            reason = "database unavailable: \(Self.describe(error))"
        }
        guard let reason else { return .json(.ok, #"{"status":"ready"}"#) }
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("status"); writer.string("not_ready")
        writer.key("reason"); writer.string(reason)
        writer.endObject()
        var headers = HTTPHeaders()
        headers.add(name: "Retry-After", value: "1")
        return .json(HTTPStatus(code: 503), writer.bytes, headers: headers)
    }

    /// Why the probe failed, in words that name no host (the probe is public).
    static func describe(_ error: PostgresError) -> String {
        switch error.kind {
        case .connectionFailed where error.message.contains("read-only"):
            return "no server accepts writes (no primary)"
        case .connectionFailed: return "cannot connect"
        case .connectionLost: return "connection lost"
        case .serverReadOnly: return "the server does not accept writes (not the primary)"
        case .poolTimeout: return "no connection free"
        case .poolClosed: return "shutting down"
        case .statementFailed, .typeMismatch: return "\(error.kind)"
        }
    }
}
