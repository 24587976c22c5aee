import AdTally
import Foundation
import HTTP
import HTTPServer
import Runtime

/// `adtally serve`: builds the service and runs it as one `ServiceGroup`: the pools, group commit,
/// the HTTP server and maintenance start in that order; `SIGTERM`/`SIGINT` stops them in reverse
/// order within `ServiceGroup.gracePeriod` (the server stops accepting and finishes what is in
/// flight first). Returns the exit code.
public enum Server {
    /// `node`: what `DATABASE_URL` names (`DatabaseStartup.migrate` found it).
    public static func run(configuration: Configuration, migrations: MigrationRunner, filters: TrafficFilters, logger: Logger,
                           node: DatabaseNode = .plain) -> Int32 {
        if configuration.accessTokens.isEmpty {
            let variables = Configuration.tokenLists.map { Configuration.variable(of: $0) }.joined(separator: ", ")
            logger.warning("no token is set (\(variables)): every admin request will be refused with 401")
        }
        if node == .citusWorker {
            // Reports read the lifecycle state and final_before where they live: the coordinator.
            guard configuration.reportsDatabaseURL != nil else {
                logger.error("\(Configuration.variable(of: \.databaseURL)) names a Citus worker: set "
                             + "\(Configuration.variable(of: \.reportsDatabaseURL)) to the coordinator's database "
                             + "(reports, feeds and final_before are read there; docs/SCALING.md)")
                return 1
            }
            logger.info("writing through a Citus worker: maintenance runs through the coordinator's processes")
        }
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        logOpenFileLimit(serverConfiguration, logger: logger)
        let service = AdTallyService(configuration: configuration, migrations: migrations, logger: logger, filters: filters, node: node)
        // The limits no client can exceed (API.md section 6): connections per peer (a trusted
        // proxy's own are not counted) and the bodies held in memory.
        let trusted = configuration.trustedProxies
        serverConfiguration.maxConnectionsPerPeer = configuration.clientMaxConnections
        serverConfiguration.uncappedPeer = { trusted.contains($0) }
        serverConfiguration.maxBufferedBodyBytes = configuration.maxBufferedBytes
        let server = HTTPServer(configuration: serverConfiguration, router: service.router, observer: service.metrics,
                                logger: logger)
        service.metrics.setServerSource {
            ServerStatistics(openConnections: server.openConnections, bufferedBodyBytes: server.bufferedBodyBytes,
                             droppedLogLines: server.droppedLogLines, acceptPauses: server.acceptPauses)
        }
        let group = ServiceGroup(services: service.services(serving: server), logger: logger) {
            filters.reload(logger: logger)
        }
        let code = group.run()
        logger.info(code == 0 ? "pool closed, exiting" : "stopped after a failed start")
        return code
    }
}

extension Server {
    /// Raises the open-file limit to the hard one (connections are file descriptors) and logs both.
    static func logOpenFileLimit(_ configuration: ServerConfiguration, logger: Logger) {
        guard let limit = System.raiseOpenFileLimit() else {
            logger.warning("the open-file limit could not be read")
            return
        }
        logger.info("open-file limit", [("soft", .int(Int(clamping: limit.soft))), ("hard", .int(Int(clamping: limit.hard))),
                                        ("soft_at_start", .int(Int(clamping: limit.before)))])
        if limit.soft < UInt64(configuration.maxConnections) + 256 {
            logger.warning("the open-file limit is below the connections the server may hold: when descriptors run out it stops accepting for a moment",
                           [("soft", .int(Int(clamping: limit.soft))), ("max_connections", .int(configuration.maxConnections))])
        }
    }

    /// The HTTP server alone with `GET /healthz`, for `scripts/bench-http`: it measures the server,
    /// not the database.
    public static func runHealthzOnly(port: Int, logger: Logger) -> Int32 {
        var edge = Edge(tokens: AccessTokens(admin: [], feed: [], reports: []), limits: nil)
        HealthRoutes.registerLiveness(on: &edge)
        let router = edge.router
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = "127.0.0.1"
        serverConfiguration.port = port
        let server = HTTPServer(configuration: serverConfiguration, router: router, logger: logger)
        return ServiceGroup(services: [HTTPService(server: server)], gracePeriod: .seconds(2), logger: logger).run()
    }
}
