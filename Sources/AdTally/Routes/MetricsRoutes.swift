import HTTP
import HTTPServer
import Postgres

/// `GET /metrics` (API.md section 4): this process's Prometheus series, registered with the other
/// routes. `Metrics` renders them from what each part reports (`ClientLimitCounts`,
/// `ReportsDatabaseGauges`); the route names the parts.
struct MetricsRoutes {
    let metrics: Metrics
    let pool: PostgresPool
    let reads: ReadDatabase
    let limits: ClientLimits

    func register(on router: inout Router) {
        let metrics = metrics, pool = pool, reads = reads, limits = limits
        let maintenanceResults = Maintenance.Result.allCases.map(\.rawValue)
        router.add(.get, "/metrics", .inline { _ in
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            let text = metrics.render(pool: pool, reports: reads, limits: limits, maintenanceResults: maintenanceResults)
            return HTTPResponse(status: .ok, headers: headers, body: Array(text.utf8))
        })
    }
}
