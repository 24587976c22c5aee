import AdTally
import Foundation
import Postgres
import Runtime

/// Start-up against a database that may not be ready yet (a container starting beside PostgreSQL):
/// bounded retries with a log line each, then the migrations under their advisory lock.
public enum DatabaseStartup {
    /// Connects, retrying every second for up to `waitSeconds`, then applies pending migrations
    /// (through a Citus worker: checks that none is pending). Returns what was applied and the kind
    /// of node the database URL names. Throws the last connection error when the database never
    /// answered, or the migration error.
    @discardableResult
    public static func migrate(_ runner: MigrationRunner, configuration: Configuration, logger: Logger,
                               waitSeconds: Int = 30) throws -> (report: MigrationRunner.Report, node: DatabaseNode) {
        let connection = try connect(configuration: configuration, logger: logger, waitSeconds: waitSeconds)
        defer { connection.close() }
        let node = try DatabaseNode.detect(on: connection)
        let report = try runner.apply(on: connection)
        // The partitions ingestion needs, in case maintenance never ran (it makes them a week ahead);
        // a worker cannot make them (DDL is the coordinator's), whose maintenance does.
        let made = node == .citusWorker ? [] : try EventPartitions.ensure(around: nil, on: connection)
        if !made.isEmpty { logger.info("event partitions made", [("days", .string(made.joined(separator: ",")))]) }
        logger.info("migrations applied", [
            ("applied", .string(report.applied.joined(separator: ","))),
            ("known", .int(runner.migrations.count)),
            ("directory", .string(runner.directory?.path ?? "")),
            ("node", .string("\(node)")),
        ])
        if !report.corrected.isEmpty {
            logger.info("migrations recorded with an earlier text of the same schema now carry the current checksum",
                        [("files", .string(report.corrected.joined(separator: ",")))])
        }
        if !report.unknownVersions.isEmpty {
            logger.warning("the database has migrations this build does not know; a newer release ran against it",
                           [("versions", report.unknownVersions.map(String.init).joined(separator: ","))])
        }
        return (report, node)
    }

    /// Opens one connection, retrying while the server is unreachable.
    public static func connect(configuration: Configuration, logger: Logger, waitSeconds: Int) throws -> PostgresConnection {
        let deadline = ContinuousClock.now + .seconds(max(0, waitSeconds))
        let whileUnreachable = RetryPolicy(attempts: .max) { error in
            (error as? PostgresError)?.kind == .connectionFailed && ContinuousClock.now < deadline
        }
        var attempt = 1
        return try whileUnreachable.run(beforeRetry: { error in
            logger.warning("database not reachable yet, retrying",
                           [("attempt", .int(attempt)), ("error", .string((error as? PostgresError)?.message ?? "\(error)"))])
            attempt += 1
            Thread.sleep(forTimeInterval: 1)
        }) {
            // The primary's defaults (target_session_attrs=read-write): with several hosts,
            // migrations go to whichever accepts writes.
            try PostgresConnection(connectionString: configuration.databaseURL, connectTimeoutSeconds: 3,
                                   usePreparedStatements: configuration.preparedStatements,
                                   parameterDefaults: PostgresConnection.primaryDefaults)
        }
    }
}
