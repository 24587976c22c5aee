import AdTally
import Foundation
import JSON
import Postgres
import Runtime

/// `adtally maintain`: runs the data lifecycle's job once (API.md section 7) for an operator's
/// scheduler, printing what it did as one JSON object per line on standard output, and exits 0
/// (also when another process held the work: `"step":"skipped"`), 1 when a step failed. The schema
/// must be migrated (`adtally migrate`); it waits for the database like `serve` does.
public enum MaintainCommand {
    public static func run(configuration: Configuration, migrations: MigrationRunner, logger: Logger,
                           output: (String) -> Void = { print($0) }) -> Int32 {
        // print: the command's JSON lines are its standard output, for the operator's scheduler.
        let connection: PostgresConnection
        do {
            connection = try DatabaseStartup.connect(configuration: configuration, logger: logger, waitSeconds: 30)
        } catch {
            logger.error("database unreachable", [("error", "\(error)")])
            return 1
        }
        defer { connection.close() }
        do {
            guard try DatabaseNode.detect(on: connection) != .citusWorker else {
                logger.error("\(Configuration.variable(of: \.databaseURL)) names a Citus worker: run adtally maintain through the coordinator (docs/SCALING.md)")
                return 1
            }
            let pending = try migrations.pendingVersions(on: connection)
            if !pending.isEmpty {
                logger.error("migrations are pending; run adtally migrate first", [("versions", pending.map(String.init).joined(separator: ","))])
                return 1
            }
        } catch {
            logger.error("cannot read the applied migrations", [("error", "\(error)")])
            return 1
        }
        let maintenance = Maintenance(settings: Maintenance.Settings(configuration))
        // A statement may run up to maintenance's limit: wait for its answer a little longer.
        connection.answerTimeout = maintenance.settings.answerTimeout
        let report = maintenance.run(on: connection)
        for step in report.steps {
            var writer = JSONWriter(reservingCapacity: 256)
            writer.beginObject()
            for (key, value) in step {
                writer.key(key)
                switch value {
                case .string(let text): writer.string(text)
                case .int(let number): writer.int(number)
                case .double(let number): writer.double(number)
                }
            }
            writer.endObject()
            output(String(decoding: writer.bytes, as: UTF8.self))
        }
        return report.result == .failed ? 1 : 0
    }
}
