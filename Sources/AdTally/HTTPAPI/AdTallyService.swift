import Foundation
import HTTP
import HTTPServer
import Postgres

/// The running product: the database pool, group commit for events, and the router with every
/// endpoint of API.md. The executable builds one, serves it, and shuts it down in order.
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
    /// The data lifecycle's job, run every `ADTALLY_MAINTENANCE_INTERVAL_SECONDS` once started.
    let maintenanceScheduler: MaintenanceScheduler
    let logger: Logger

    /// Wires everything; opens no connection yet (the pool connects on first use).
    public init(configuration: Configuration, migrations: MigrationRunner, logger: Logger, clock: any WallClock = SystemClock(),
                acquireTimeout: Duration = .seconds(2)) {
        self.configuration = configuration
        self.logger = logger
        let pool = PostgresPool(configuration: .init(
            connectionString: configuration.databaseURL, size: configuration.poolSize, acquireTimeout: acquireTimeout,
            connectTimeoutSeconds: 2, usePreparedStatements: configuration.preparedStatements,
            answerTimeout: .seconds(configuration.answerTimeoutSeconds), parameterDefaults: PostgresConnection.primaryDefaults))
        self.pool = pool
        // Reports get a pool of their own on their own database; without one they share the
        // primary's, as before, with the reports' longer bound on an answer.
        let reportsPool = configuration.reportsDatabaseURL.map { url in
            PostgresPool(configuration: .init(
                connectionString: url, size: configuration.reportsPoolSize, acquireTimeout: acquireTimeout,
                connectTimeoutSeconds: 2, usePreparedStatements: configuration.preparedStatements))
        }
        self.reportsPool = reportsPool
        let reads = ReadDatabase(pool: reportsPool ?? pool, isStandby: reportsPool != nil, logger: logger)
        // Group commit wants few, large transactions: each committer takes everything queued, so
        // two keep the database busy (one works while the other waits for its COMMIT to reach the
        // disk); more only split the batches. Measured with scripts/bench-ingest's workload on 2
        // cores, once a committer no longer ran into another's row locks (CommitQueue): batches
        // of 50 made 39-41k events/s with 1 committer, 67-69k with 2, 56-66k with 3 and 54-60k
        // with 4; single events 12.6-12.8k with 2 against 11.2-11.7k with 3. (Before CommitQueue,
        // 3 beat 2, because a committer stuck on a lock left the database idle.) Measured again on
        // another 2-core machine, whose disk flushes faster, with answers sent by the committer
        // (two runs each): batches 29-30k with 1, 46-56k with 2, 46-51k with 3, 48-53k with 4;
        // single events 11.3-12.3k whatever the count, p99 8-9 ms with 1 or 2 and 11-13 ms with 3
        // or 4. The other pool connections serve snapshots, reports and probes.
        let committers = max(1, min(2, configuration.poolSize - 1))
        let ingestor = EventIngestor(pool: pool, store: EventStore(clickRule: configuration.clickRule),
                                     logger: logger, committers: committers)
        self.ingestor = ingestor
        let checks = RequestChecks(adminToken: configuration.adminToken.map { Array($0.utf8) })
        let metrics = Metrics()
        self.metrics = metrics
        var router = Router(errorBody: .api)
        HealthRoutes(pool: pool, migrations: migrations).register(on: &router)
        router.add(.get, "/metrics", nonBlocking: true) { _ in
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            return HTTPResponse(status: .ok, headers: headers, body: Array(metrics.render(pool: pool, reports: reads).utf8))
        }
        FeedRoutes(checks: checks, pool: pool, reads: reads, store: FeedSnapshotStore(), clock: clock).register(on: &router)
        EventRoutes(checks: checks, ingestor: ingestor, clock: clock, metrics: metrics).register(on: &router)
        let retentionMicroseconds = Int64(configuration.eventsRetentionDays) * 86_400 * 1_000_000
        ReportRoutes(checks: checks, database: reads, horizon: { clock.now().adding(microseconds: -retentionMicroseconds) }).register(on: &router)
        self.router = router
        let maintenance = Maintenance(settings: .init(eventsRetentionDays: configuration.eventsRetentionDays,
                                                      sessionTTLDays: configuration.sessionTTLDays))
        maintenanceScheduler = MaintenanceScheduler(pool: pool, maintenance: maintenance, metrics: metrics, logger: logger,
                                                    intervalSeconds: configuration.maintenanceIntervalSeconds)
    }

    /// Starts the background work (maintenance); call once the server listens.
    public func startBackgroundWork() {
        maintenanceScheduler.start()
    }

    /// Stops maintenance and group commit and closes the pool; call after the HTTP server stopped.
    public func shutdown() {
        maintenanceScheduler.shutdown()
        ingestor.shutdown()
        pool.shutdown()
        reportsPool?.shutdown()
    }
}
