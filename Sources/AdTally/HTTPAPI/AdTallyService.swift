import Foundation
import HTTP
import HTTPServer
import Postgres

/// The running product: the database pool, group commit for events, and the router with every
/// endpoint of API.md. The executable builds one, serves it, and shuts it down in order.
public final class AdTallyService: Sendable {
    public let configuration: Configuration
    public let pool: PostgresPool
    public let ingestor: EventIngestor
    public let router: Router
    /// The Prometheus series; also the HTTP server's observer.
    public let metrics: Metrics
    let logger: Logger

    /// Wires everything; opens no connection yet (the pool connects on first use).
    public init(configuration: Configuration, migrations: MigrationRunner, logger: Logger, clock: any WallClock = SystemClock(),
                acquireTimeout: Duration = .seconds(2)) {
        self.configuration = configuration
        self.logger = logger
        let pool = PostgresPool(configuration: .init(connectionString: configuration.databaseURL, size: configuration.poolSize,
                                                     acquireTimeout: acquireTimeout, connectTimeoutSeconds: 2))
        self.pool = pool
        // Group commit wants few, large transactions: each committer takes everything queued, so
        // a few keep the database busy while one commits; more only split the batches. Measured
        // with scripts/bench-ingest on 2 cores: batches of 50 went from 41k to 47k events/s with 3
        // committers instead of 2, and 4 gave no more; single events were the same with 2 or 3 and
        // fell with 4 (7 gave 0.46x pgbench). The other pool connections serve snapshots, reports
        // and probes.
        let committers = max(1, min(3, configuration.poolSize - 1))
        let ingestor = EventIngestor(pool: pool, store: EventStore(clickWindowSeconds: configuration.clickWindowSeconds),
                                     clock: clock, logger: logger, committers: committers)
        self.ingestor = ingestor
        let checks = RequestChecks(adminToken: configuration.adminToken.map { Array($0.utf8) })
        let metrics = Metrics()
        self.metrics = metrics
        var router = Router()
        HealthRoutes(pool: pool, migrations: migrations).register(on: &router)
        router.add(.get, "/metrics", nonBlocking: true) { _ in
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            return HTTPResponse(status: .ok, headers: headers, body: Array(metrics.render(pool: pool).utf8))
        }
        FeedRoutes(checks: checks, pool: pool, store: FeedSnapshotStore(), clock: clock).register(on: &router)
        EventRoutes(checks: checks, ingestor: ingestor, clock: clock, metrics: metrics).register(on: &router)
        ReportRoutes(checks: checks, pool: pool).register(on: &router)
        self.router = router
    }

    /// Stops group commit and closes the pool; call after the HTTP server stopped.
    public func shutdown() {
        ingestor.shutdown()
        pool.shutdown()
    }
}
