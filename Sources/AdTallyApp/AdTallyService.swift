import AdTally
import Foundation
import HTTP
import HTTPServer
import Postgres
import Runtime
import Timestamps

/// The running product: the database pools, group commit for events, and the edge with every
/// feature slice's routes (API.md). The composition root: the one place that names every slice and
/// hands each what it needs. The executable builds one and runs its `services` as a `ServiceGroup`.
public final class AdTallyService: Sendable {
    public let configuration: Configuration
    /// The primary's pool: ingestion, feed registration, readiness.
    public let pool: PostgresPool
    /// The reports database's own pool, when `ADTALLY_REPORTS_DATABASE_URL` is set.
    public let reportsPool: PostgresPool?
    /// One connection to the primary for the advertiser keys' poll alone, so that a revocation
    /// never waits behind ingestion or reports for a connection of `pool`.
    let keysPool: PostgresPool
    public let ingestor: EventIngestor
    /// Where event transactions run (on Citus with `ADTALLY_CITUS_ROUTING` on: the shard map).
    public let topology: EventTopology
    public let router: Router
    /// The Prometheus series; also the HTTP server's observer.
    public let metrics: Metrics
    /// The limits per client (API.md section 6).
    public let limits: ClientLimits
    /// The traffic filters' lists, reloaded on `SIGHUP`.
    public let filters: TrafficFilters
    /// The advertiser keys in memory, kept in step with the database (API.md section 13).
    public let keyringSync: KeyringSync
    /// The data lifecycle's job, run every `ADTALLY_MAINTENANCE_INTERVAL_SECONDS` once started;
    /// nil through a Citus worker (maintenance's DDL and state are the coordinator's).
    let maintenanceScheduler: MaintenanceScheduler?
    let logger: Logger

    /// Wires everything; opens no connection yet (the pool connects on first use). `acquireTimeout`
    /// is `Tunables.acquireTimeout` unless a test wants another. `node`: what `DATABASE_URL` names.
    public init(configuration: Configuration, migrations: MigrationRunner, logger: Logger, clock: any WallClock = SystemClock(),
                filters: TrafficFilters = TrafficFilters(), acquireTimeout: Duration? = nil,
                limitsClock: ClientLimits.Clock = .system, node: DatabaseNode = .plain) {
        self.filters = filters
        self.configuration = configuration
        self.logger = logger
        let acquireTimeout = acquireTimeout ?? Tunables.acquireTimeout
        // The committers' connections are held back for them: readiness, feeds, reports (without a
        // reports database) and maintenance share the rest, so no flood of those starves ingestion.
        let committers = (node.isCitus ? EventTopology.citus : .plain).committers(poolSize: configuration.poolSize)
        let pool = PostgresPool(configuration: .init(
            connectionString: configuration.databaseURL, size: configuration.poolSize, acquireTimeout: acquireTimeout,
            connectTimeoutSeconds: Tunables.connectTimeoutSeconds, usePreparedStatements: configuration.preparedStatements,
            answerTimeout: configuration.answerTimeout, parameterDefaults: PostgresConnection.primaryDefaults,
            reservedConnections: Tunables.reservedConnections(poolSize: configuration.poolSize, committers: committers)))
        self.pool = pool
        // On Citus, each session's events go to the node of its shard (docs/SCALING.md).
        let topology: EventTopology
        switch (node.isCitus, configuration.citusRouting) {
        case (false, _): topology = .plain
        case (true, false): topology = .citus
        case (true, true):
            topology = .routedCitus(ShardRouter(metadata: pool, refreshInterval: Tunables.shardMapRefresh, logger: logger) { node in
                pool.sibling(host: node.host, port: node.port, size: committers)
            })
        }
        self.topology = topology
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
        let ingestor = EventIngestor(pool: pool, store: EventStore(clickRule: configuration.clickRule, topology: topology), logger: logger,
                                     committers: committers, queueWait: Tunables.commitQueueWait,
                                     transactionsPerShard: Tunables.transactionsPerShard)
        self.ingestor = ingestor
        let metrics = Metrics()
        self.metrics = metrics
        // Warnings of the limits leave the IO queues through an outbox: standard output may block.
        let outbox = LogOutbox(logger: logger)
        let clients = ClientAddressResolver(trusted: configuration.trustedProxies)
        let limits = ClientLimits(settings: configuration.clientLimits, resolver: clients, clock: limitsClock) { client, limit in
            outbox.warning("client over a limit: answered 429 (one line per address and minute)",
                           [("client", .string(client.description)), ("limit", .string(limit.rawValue))])
        }
        self.limits = limits
        let keyring = AdvertiserKeyring(clock: clock)
        var keysConfiguration = pool.configuration
        keysConfiguration.size = 1
        keysConfiguration.reservedConnections = 0
        let keysPool = PostgresPool(configuration: keysConfiguration)
        self.keysPool = keysPool
        keyringSync = KeyringSync(keyring: keyring, pool: keysPool, refreshInterval: Tunables.keyringRefresh, lastUseInterval: Tunables.keyUseWrite,
                                  logger: logger)
        let authCounts = AuthCounts()
        var edge = Edge(tokens: configuration.accessTokens, keyring: keyring, limits: limits, authCounts: authCounts, log: outbox)
        HealthRoutes(pool: pool, migrations: migrations).register(on: &edge)
        MetricsRoutes(metrics: metrics, pool: pool, reads: reads, limits: limits, keys: keyring, auth: authCounts).register(on: &edge)
        DashboardRoutes().register(on: &edge)
        FeedRoutes(pool: pool, reads: reads, clock: clock).register(on: &edge)
        EventRoutes(ingestor: ingestor, clock: clock, filters: filters, clients: clients, limits: limits).register(on: &edge)
        // The raw-event retention horizon now: reports, credits and the events export check their bounds against it.
        let retention = configuration.eventsRetention.wholeMicroseconds
        let horizon: @Sendable () -> Timestamp = { clock.now().adding(microseconds: -retention) }
        let zones = ZoneRegistrations(pool: pool, logger: logger)
        ReportRoutes(database: reads, horizon: horizon, maxDuration: configuration.reportMaxDuration,
                     registerZone: { zones.register($0) }).register(on: &edge)
        EventExportRoutes(database: reads, horizon: horizon, maxDuration: configuration.reportMaxDuration).register(on: &edge)
        // API 1.4: credits, and erasure of a session (both bounded by the maintenance statement limit).
        let limit = StatementLimit(configuration.maintenanceStatementTimeout)
        CreditRoutes(pool: pool, reads: reads, limit: limit, horizon: horizon, metrics: metrics).register(on: &edge)
        ErasureRoutes(pool: pool, limit: limit, metrics: metrics).register(on: &edge)
        // API 1.5: advertiser keys.
        KeyRoutes(pool: pool, keyring: keyring, logger: logger).register(on: &edge)
        self.router = edge.router
        maintenanceScheduler = node == .citusWorker ? nil : MaintenanceScheduler(
            pool: pool, maintenance: Maintenance(settings: Maintenance.Settings(configuration)), metrics: metrics, logger: logger,
            intervalSeconds: configuration.maintenanceInterval.wholeSeconds)
    }

    /// The process's services, in the order they start (`ServiceGroup` stops them in reverse):
    /// the pools, the shard map, group commit, the advertiser keys (read once before the server
    /// listens), the HTTP `server` (which serves this service's router), then maintenance, once the
    /// server listens.
    func services(serving server: HTTPServer) -> [any Service] {
        [DatabasePools(primary: pool, reports: reportsPool, keys: keysPool)] + (topology.router.map { [$0] } ?? [])
            + [ingestor, keyringSync, HTTPService(server: server)] + (maintenanceScheduler.map { [$0] } ?? [])
    }

    /// Stops what this service started itself (group commit, if anything started it) and closes
    /// the pools: for callers that use the router without a server (tests).
    public func shutdown() {
        let deadline = ContinuousClock.now + ServiceGroup.gracePeriod
        ingestor.stop(by: deadline)
        keyringSync.stop(by: deadline)
        topology.router?.stop(by: deadline)
        DatabasePools(primary: pool, reports: reportsPool, keys: keysPool).stop(by: deadline)
    }
}
