import Foundation
import HTTP
import HTTPServer

/// `adtally serve`: builds the service and runs it as one `ServiceGroup`: the pools, group commit,
/// the HTTP server and maintenance start in that order; `SIGTERM`/`SIGINT` stops them in reverse
/// order within `ServiceGroup.gracePeriod` (the server stops accepting and finishes what is in
/// flight first). Returns the exit code.
public enum Server {
    /// `node`: what `DATABASE_URL` names (`DatabaseStartup.migrate` found it).
    public static func run(configuration: Configuration, migrations: MigrationRunner, filters: TrafficFilters, logger: Logger,
                           node: DatabaseNode = .plain) -> Int32 {
        if configuration.adminToken == nil {
            logger.warning("ADTALLY_ADMIN_TOKEN is not set: every admin request will be refused with 401")
        }
        if node == .citusWorker {
            // Reports read the lifecycle state and final_before where they live: the coordinator.
            guard configuration.reportsDatabaseURL != nil else {
                logger.error("DATABASE_URL names a Citus worker: set ADTALLY_REPORTS_DATABASE_URL to the coordinator's database "
                             + "(reports, feeds and final_before are read there; docs/SCALING.md)")
                return 1
            }
            logger.info("writing through a Citus worker: maintenance runs through the coordinator's processes")
        }
        let service = AdTallyService(configuration: configuration, migrations: migrations, logger: logger, filters: filters, node: node)
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        let server = HTTPServer(configuration: serverConfiguration, router: service.router, observer: service.metrics,
                                logger: ServerLogAdapter(logger: logger))
        service.metrics.setConnectionsSource { server.openConnections }
        let group = ServiceGroup(services: service.services(serving: server), logger: logger) {
            filters.reload(logger: logger)
        }
        let code = group.run()
        logger.info(code == 0 ? "pool closed, exiting" : "stopped after a failed start")
        return code
    }
}

extension Server {
    /// The HTTP server alone with `GET /healthz`, for `scripts/bench-http`: it measures the server,
    /// not the database.
    public static func runHealthzOnly(port: Int, logger: Logger) -> Int32 {
        var router = Router(errorBody: .api)
        router.add(.get, "/healthz", .inline { _ in .json(.ok, #"{"status":"ok"}"#) })
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = "127.0.0.1"
        serverConfiguration.port = port
        let server = HTTPServer(configuration: serverConfiguration, router: router, logger: ServerLogAdapter(logger: logger))
        return ServiceGroup(services: [HTTPService(server: server)], gracePeriod: .seconds(2), logger: logger).run()
    }
}
