import HTTP
import HTTPServer
import Postgres

/// `GET /metrics` (API.md section 4): this process's Prometheus series, registered with the other
/// routes. `Metrics` renders them from what each part reports (`ClientLimitCounts`,
/// `ReportsDatabaseGauges`); the route names the parts.
public struct MetricsRoutes: Sendable {
    let metrics: Metrics
    let pool: PostgresPool
    let reads: ReadDatabase
    let limits: ClientLimits
    let keys: AdvertiserKeyring
    let auth: AuthCounts

    public init(metrics: Metrics, pool: PostgresPool, reads: ReadDatabase, limits: ClientLimits, keys: AdvertiserKeyring, auth: AuthCounts) {
        self.metrics = metrics
        self.pool = pool
        self.reads = reads
        self.limits = limits
        self.keys = keys
        self.auth = auth
    }

    public func register(on edge: inout Edge) {
        let metrics = metrics, pool = pool, reads = reads, limits = limits, keys = keys, auth = auth
        let maintenanceResults = Maintenance.Result.allCases.map(\.rawValue)
        edge.add(.get, "/metrics", .probe) { _ in .inline { _ in
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            let text = metrics.render(pool: pool, reports: reads, limits: limits, keys: keys, auth: auth,
                                      maintenanceResults: maintenanceResults)
            return HTTPResponse(status: .ok, headers: headers, body: Array(text.utf8))
        } }
    }
}
