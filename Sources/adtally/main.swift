import AdTally
import Foundation

/// The executable is thin: it parses the command, reads the configuration, and hands over to AdTally.
let arguments = Array(CommandLine.arguments.dropFirst())
let environment = ProcessInfo.processInfo.environment

func printHelp() {
    var text = """
    adtally: ad impression and click tracking that refuses to count what client bugs report twice.

    Usage:
      adtally [serve]     apply pending migrations, then serve HTTP (the default)
      adtally migrate     apply pending migrations and exit
      adtally maintain    run maintenance once (partitions, rollups, retention), print it as JSON lines, exit
      adtally healthcheck exit 0 when the server on 127.0.0.1:$PORT answers /healthz with 200
      adtally --version   the version (also adtally_build_info in /metrics)
      adtally --help      this text

    Environment:

    """
    for setting in Configuration.settings {
        text += "  \(setting.name.padding(toLength: 38, withPad: " ", startingAt: 0)) \(setting.help)\n"
        text += "  \("".padding(toLength: 38, withPad: " ", startingAt: 0)) \(setting.form); default \(setting.defaultValue)\n"
    }
    text += "\nEvery setting: docs/CONFIGURATION.md. The HTTP API: docs/API.md and docs/openapi.yaml.\n"
    // --help is for a human at a terminal: plain text on stdout, not a JSON log line.
    print(text, terminator: "")
}

func fail(_ line: String) -> Never {
    FileHandle.standardError.write(Data("adtally: \(line)\n".utf8))
    exit(2)
}

let command = arguments.first ?? "serve"
switch command {
case "-h", "--help", "help":
    printHelp()
    exit(0)
case "--version", "version":
    print("adtally \(BuildInfo.version)")
    exit(0)
case "migrate", "serve":
    guard arguments.count <= 1 else { fail("unexpected argument \(arguments[1]); see adtally --help") }
    let configuration: Configuration
    do {
        configuration = try Configuration.fromEnvironment(environment)
    } catch {
        fail("configuration: \(error)")
    }
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
        migrations = try MigrationRunner.located(directory: configuration.migrationsDirectory)
        node = try DatabaseStartup.migrate(migrations, configuration: configuration, logger: logger).node
    } catch {
        logger.error("start-up failed", [("error", "\(error)")])
        fail("\(error)")
    }
    if command == "migrate" { exit(0) }
    exit(Server.run(configuration: configuration, migrations: migrations, filters: filters, logger: logger, node: node))
case "maintain":
    guard arguments.count <= 1 else { fail("unexpected argument \(arguments[1]); see adtally --help") }
    let configuration: Configuration
    do {
        configuration = try Configuration.fromEnvironment(environment)
    } catch {
        fail("configuration: \(error)")
    }
    // The log (warnings, errors) goes to standard error: standard output is the run's JSON lines.
    let logger = Logger(level: configuration.logLevel) { line in FileHandle.standardError.write(Data(line.utf8)) }
    let migrations: MigrationRunner
    do {
        migrations = try MigrationRunner.located(directory: configuration.migrationsDirectory)
    } catch {
        logger.error("migrations not readable", [("error", "\(error)")])
        exit(1)
    }
    exit(MaintainCommand.run(configuration: configuration, migrations: migrations, logger: logger))
case "healthcheck":
    // The container HEALTHCHECK: GET /healthz on this machine's PORT.
    let port = Int(environment["PORT"] ?? "") ?? 8080
    exit(HealthProbe.run(port: port))
case "serve-http-bench":
    // Benchmark only (scripts/bench-http): the HTTP server with just /healthz, no database.
    guard arguments.count == 3, arguments[1] == "--port", let port = Int(arguments[2]) else {
        fail("usage: adtally serve-http-bench --port N")
    }
    exit(Server.runHealthzOnly(port: port, logger: Logger(level: .warning)))
default:
    fail("unknown command \(command); see adtally --help")
}
