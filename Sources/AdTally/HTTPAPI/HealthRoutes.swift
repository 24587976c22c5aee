import HTTP
import HTTPServer
import Postgres

/// `GET /healthz` and `GET /readyz` (API.md section 4). Liveness never touches the database;
/// readiness asks it, with a short statement timeout so that a hung database cannot hang the probe.
struct HealthRoutes: Sendable {
    let pool: PostgresPool
    let migrations: MigrationRunner

    func register(on router: inout Router) {
        router.add(.get, "/healthz", nonBlocking: true) { _ in .json(.ok, #"{"status":"ok"}"#) }
        router.get("/readyz", readiness)
    }

    @Sendable func readiness(_ context: RequestContext) throws -> HTTPResponse {
        let reason: String?
        do {
            let pending = try pool.withConnection { connection -> [Int] in
                try connection.execute("SET statement_timeout = 2000")
                defer { _ = try? connection.execute("SET statement_timeout = 0") }
                return try migrations.pendingVersions(on: connection)
            }
            reason = pending.isEmpty ? nil : "migrations pending: \(pending.map(String.init).joined(separator: ","))"
        } catch let error as PostgresError {
            reason = "database unavailable: \(error.kind)"
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
}
