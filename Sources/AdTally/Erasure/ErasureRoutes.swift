import HTTP
import HTTPServer
import JSON
import Postgres
import Timestamps

/// `DELETE /v1/sessions/{session_id}` (API.md section 12), a token with every scope.
public struct ErasureRoutes: Sendable {
    let pool: PostgresPool
    let store: ErasureStore
    let metrics: any ErasureMetrics

    public init(pool: PostgresPool, limit: StatementLimit, metrics: any ErasureMetrics) {
        self.pool = pool
        self.store = ErasureStore(limit: limit)
        self.metrics = metrics
    }

    static let pattern = "/v1/sessions/{session_id}"

    public func register(on edge: inout Edge) {
        edge.add(.delete, Self.pattern, .admin()) { request in
            guard let sessionID = request.path["session_id"] else { throw APIError.invalidPath("session_id") }
            return .onWorker { _ in try erase(sessionID) }
        }
    }

    func erase(_ sessionID: String) throws -> HTTPResponse {
        let erasure: ErasureStore.Erasure
        do {
            erasure = try pool.withConnection(answerTimeout: store.limit.answerTimeout) { connection in
                try store.erase(sessionID, on: connection)
            }
        } catch let error as PostgresError where error.wasGivenUp {
            throw APIError.unavailable("The erasure did not finish; the session may already be refused. Send the same request again to finish it.")
        }
        if erasure.isNew { metrics.recordErasure() }
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("session_id"); writer.string(sessionID)
        writer.key("erased_at"); writer.string(erasure.erasedAt.rfc3339)
        writer.key("events"); writer.int(erasure.events)
        writer.key("snapshots"); writer.int(erasure.snapshots)
        writer.endObject()
        return .json(.ok, writer.bytes)
    }
}

/// Where erasures are counted for `/metrics` (`adtally_sessions_erased_total`).
public protocol ErasureMetrics: Sendable {
    func recordErasure()
}
