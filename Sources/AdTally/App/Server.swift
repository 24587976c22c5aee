import Foundation
import HTTP
import HTTPServer

/// `adtally serve`: builds the service, listens, and on `SIGTERM`/`SIGINT` stops accepting,
/// finishes what is in flight (10 s at most), closes the pool and returns the exit code.
public enum Server {
    public static func run(configuration: Configuration, logger: Logger) -> Int32 {
        guard let directory = Migration.locateDirectory(), let migrations = try? Migration.load(from: directory) else {
            logger.error("migrations folder not readable")
            return 2
        }
        if configuration.adminToken == nil {
            logger.warning("ADTALLY_ADMIN_TOKEN is not set: every admin request will be refused with 401")
        }
        let service = AdTallyService(configuration: configuration, migrations: MigrationRunner(migrations: migrations), logger: logger)
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        let server = HTTPServer(configuration: serverConfiguration, router: service.router, observer: service.metrics,
                                logger: ServerLogAdapter(logger: logger))
        service.metrics.setConnectionsSource { server.openConnections }
        // Installed before the server logs "listening" (with the bound port, once it accepts
        // connections), so that whoever waits for that line may stop the server with SIGTERM.
        let signals = ShutdownSignals(server: server, gracePeriod: .seconds(9)) { _ in
            logger.info("shutting down: finishing requests in flight")
        }
        do {
            try server.start()
        } catch {
            signals.cancel()
            logger.error("cannot listen", [("host", .string(configuration.host)), ("port", .int(configuration.port)),
                                           ("error", .string("\(error)"))])
            service.shutdown()
            return 1
        }
        service.startBackgroundWork()
        server.waitUntilStopped()
        signals.cancel()
        service.shutdown()
        logger.info("pool closed, exiting")
        return 0
    }
}

extension Server {
    /// The HTTP server alone with `GET /healthz`, for `scripts/bench-http`: it measures the server,
    /// not the database.
    public static func runHealthzOnly(port: Int, logger: Logger) -> Int32 {
        var router = Router(errorBody: .api)
        router.add(.get, "/healthz", nonBlocking: true) { _ in .json(.ok, #"{"status":"ok"}"#) }
        var serverConfiguration = ServerConfiguration()
        serverConfiguration.host = "127.0.0.1"
        serverConfiguration.port = port
        let server = HTTPServer(configuration: serverConfiguration, router: router, logger: ServerLogAdapter(logger: logger))
        do {
            try server.start()
        } catch {
            logger.error("cannot listen", [("error", "\(error)")])
            return 1
        }
        let signals = ShutdownSignals(server: server, gracePeriod: .seconds(2)) { _ in }
        server.waitUntilStopped()
        signals.cancel()
        return 0
    }
}

/// Sends the HTTP server's log lines (access log, errors) to AdTally's JSON logger.
struct ServerLogAdapter: ServerLogger {
    let logger: Logger

    func isEnabled(_ level: ServerLogLevel) -> Bool { Self.map(level) >= logger.level }

    func log(_ level: ServerLogLevel, _ message: String, _ fields: [(String, LogValue)]) {
        logger.log(Self.map(level), message, fields)
    }

    func log(batch: [ServerLogLine]) {
        logger.log(lines: batch.map { (level: Self.map($0.level), message: $0.message, fields: $0.fields) })
    }

    func logAccess(_ records: [ResponseRecord]) {
        logger.logAccess(records)
    }

    static func map(_ level: ServerLogLevel) -> AdTally.LogLevel {
        let mapped: AdTally.LogLevel
        switch level {
        case .debug: mapped = .debug
        case .info: mapped = .info
        case .warning: mapped = .warning
        default: mapped = .error
        }
        return mapped
    }
}
