import Foundation
import HTTP
import HTTPServer

/// `adtally serve`: builds the service and runs it as one `ServiceGroup`: the pools, group commit,
/// the HTTP server and maintenance start in that order; `SIGTERM`/`SIGINT` stops them in reverse
/// order within `ServiceGroup.gracePeriod` (the server stops accepting and finishes what is in
/// flight first). Returns the exit code.
public enum Server {
    public static func run(configuration: Configuration, migrations: MigrationRunner, filters: TrafficFilters, logger: Logger) -> Int32 {
        if configuration.adminToken == nil {
            logger.warning("ADTALLY_ADMIN_TOKEN is not set: every admin request will be refused with 401")
        }
        let service = AdTallyService(configuration: configuration, migrations: migrations, logger: logger, filters: filters)
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
