import Foundation
import HTTP
import HTTPServer
import Postgres

/// The running product: the database pool, group commit for events, and the router with every
/// endpoint of API.md. The executable builds one and runs its `services` as a `ServiceGroup`.
public final class AdTallyService: Sendable {
    public let configuration: Configuration
    /// The primary's pool: ingestion, feed registration, readiness.
    public let pool: PostgresPool
    /// The reports database's own pool, when `ADTALLY_REPORTS_DATABASE_URL` is set.
    public let reportsPool: PostgresPool?
    public let ingestor: EventIngestor
    public let router: Router
    /// The Prometheus series; also the HTTP server's observer.
    public let metrics: Metrics
    /// The data lifecycle's job, run every `ADTALLY_MAINTENANCE_INTERVAL_SECONDS` once started;
    /// nil through a Citus worker (maintenance's DDL and state are the coordinator's).
    let maintenanceScheduler: MaintenanceScheduler?
    let logger: Logger

    /// Wires everything; opens no connection yet (the pool connects on first use). `acquireTimeout`
    /// is `Tunables.acquireTimeout` unless a test wants another.
    /// The traffic filters' lists, reloaded on `SIGHUP`.
    public let filters: TrafficFilters

    /// `node`: what `DATABASE_URL` names. On Citus a transaction stores one session's events (one
    /// shard); through a worker, no maintenance runs here.
    public init(configuration: Configuration, migrations: MigrationRunner, logger: Logger, clock: any WallClock = SystemClock(),
                filters: TrafficFilters = TrafficFilters(), acquireTimeout: Duration = .seconds(2), node: DatabaseNode = .plain) {
        self.filters = filters
        self.configuration = configuration
        self.logger = logger
        let pool = PostgresPool(configuration: .init(
            connectionString: configuration.databaseURL, size: configuration.poolSize, acquireTimeout: acquireTimeout,
            connectTimeoutSeconds: Tunables.connectTimeoutSeconds, usePreparedStatements: configuration.preparedStatements,
            answerTimeout: configuration.answerTimeout, parameterDefaults: PostgresConnection.primaryDefaults))
        self.pool = pool
        // Reports get a pool of their own on their own database; without one they share the
        // primary's, with the reports' longer bound on an answer.
        let reportsPool = configuration.reportsDatabaseURL.map { url in
            PostgresPool(configuration: .init(
                connectionString: url, size: configuration.reportsPoolSize, acquireTimeout: acquireTimeout,
                connectTimeoutSeconds: Tunables.connectTimeoutSeconds, usePreparedStatements: configuration.preparedStatements))
        }
        self.reportsPool = reportsPool
        let reads = ReadDatabase(pool: reportsPool ?? pool, isStandby: reportsPool != nil, answerTimeout: Tunables.reportsAnswerTimeout,
                                 logger: logger)
        let ingestor = EventIngestor(pool: pool, store: EventStore(clickRule: configuration.clickRule), logger: logger,
                                     committers: Tunables.committers(poolSize: configuration.poolSize, oneSessionPerTransaction: node.isCitus),
                                     queueWait: Tunables.commitQueueWait, oneSessionPerTransaction: node.isCitus)
        self.ingestor = ingestor
        let checks = RequestChecks(adminToken: configuration.adminToken.map { Array($0.utf8) })
        let metrics = Metrics()
        self.metrics = metrics
        var router = Router(errorBody: .api)
        HealthRoutes(pool: pool, migrations: migrations).register(on: &router)
        router.add(.get, "/metrics", .inline { _ in
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            return HTTPResponse(status: .ok, headers: headers, body: Array(metrics.render(pool: pool, reports: reads).utf8))
        })
        FeedRoutes(checks: checks, pool: pool, reads: reads, store: FeedSnapshotStore(), clock: clock).register(on: &router)
        DashboardRoutes().register(on: &router)
        EventRoutes(checks: checks, ingestor: ingestor, clock: clock, metrics: metrics, filters: filters,
                    clients: ClientAddressResolver(trusted: configuration.trustedProxies)).register(on: &router)
        let retention = configuration.eventsRetention.wholeMicroseconds
        ReportRoutes(checks: checks, database: reads, horizon: { clock.now().adding(microseconds: -retention) }).register(on: &router)
        self.router = router
        maintenanceScheduler = node == .citusWorker ? nil : MaintenanceScheduler(pool: pool, maintenance: Maintenance(settings: Maintenance.Settings(configuration)),
                                                    metrics: metrics, logger: logger,
                                                    intervalSeconds: configuration.maintenanceInterval.wholeSeconds)
    }

    /// The process's services, in the order they start (`ServiceGroup` stops them in reverse):
    /// the pools, group commit, the HTTP `server` (which serves this service's router), then
    /// maintenance, once the server listens.
    func services(serving server: HTTPServer) -> [any Service] {
        [DatabasePools(primary: pool, reports: reportsPool), ingestor, HTTPService(server: server)] + (maintenanceScheduler.map { [$0] } ?? [])
    }

    /// Stops what this service started itself (group commit, if anything started it) and closes
    /// the pools: for callers that use the router without a server (tests).
    public func shutdown() {
        let deadline = ContinuousClock.now + ServiceGroup.gracePeriod
        ingestor.stop(by: deadline)
        DatabasePools(primary: pool, reports: reportsPool).stop(by: deadline)
    }
}
