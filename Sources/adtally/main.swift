import AdTally
import AdTallyApp
import Runtime
import Foundation

/// The executable is thin: it parses the command, reads the configuration, and hands over to
/// AdTallyApp, the composition root.
let arguments = Array(CommandLine.arguments.dropFirst())
let environment = ProcessInfo.processInfo.environment

func fail(_ line: String) -> Never {
    FileHandle.standardError.write(Data("adtally: \(line)\n".utf8))
    exit(2)
}

/// The configuration of a command that takes no argument; a bad setting stops with its one line.
func commandConfiguration() -> Configuration {
    guard arguments.count <= 1 else { fail("unexpected argument \(arguments[1]); see adtally --help") }
    do {
        return try Configuration.fromEnvironment(environment)
    } catch {
        fail("configuration: \(error)")
    }
}

let command = arguments.first ?? "serve"
switch command {
case "-h", "--help", "help":
    // --help is for a human at a terminal: plain text on stdout, not a JSON log line.
    print(CommandHelp.text, terminator: "")
    exit(0)
case "--version", "version":
    print("adtally \(BuildInfo.version)")
    exit(0)
case "migrate", "serve":
    let configuration = commandConfiguration()
    let logger = Logger(level: configuration.logLevel)
    let filters: TrafficFilters
    do {
        filters = try TrafficFilters(configuration: configuration)
    } catch {
        fail("configuration: \(error)")
    }
    let migrations: MigrationRunner
    let node: DatabaseNode
    do {
        // Located and read once; every command below uses this set.
        migrations = try MigrationRunner.located(by: configuration)
        node = try DatabaseStartup.migrate(migrations, configuration: configuration, logger: logger).node
    } catch {
        logger.error("start-up failed", [("error", "\(error)")])
        fail("\(error)")
    }
    if command == "migrate" { exit(0) }
    exit(Server.run(configuration: configuration, migrations: migrations, filters: filters, logger: logger, node: node))
case "maintain":
    let configuration = commandConfiguration()
    // The log (warnings, errors) goes to standard error: standard output is the run's JSON lines.
    let logger = Logger(level: configuration.logLevel) { line in FileHandle.standardError.write(Data(line.utf8)) }
    let migrations: MigrationRunner
    do {
        migrations = try MigrationRunner.located(by: configuration)
    } catch {
        logger.error("migrations not readable", [("error", "\(error)")])
        exit(1)
    }
    exit(MaintainCommand.run(configuration: configuration, migrations: migrations, logger: logger))
case "healthcheck":
    // The container HEALTHCHECK: GET /healthz on this machine's port (the default when unset or bad).
    exit(HealthProbe.run(port: Configuration.value(of: \.port, in: environment)))
case "serve-http-bench":
    // Benchmark only (scripts/bench-http): the HTTP server with just /healthz, no database.
    guard arguments.count == 3, arguments[1] == "--port", let port = Int(arguments[2]) else {
        fail("usage: adtally serve-http-bench --port N")
    }
    exit(Server.runHealthzOnly(port: port, logger: Logger(level: .warning)))
default:
    fail("unknown command \(command); see adtally --help")
}
