import Foundation

/// Everything AdTally reads from its environment (twelve-factor), validated at start so that a bad
/// value stops the process with one line naming the variable instead of failing later.
public struct Configuration: Sendable, Equatable {
    /// libpq connection string or URI (`DATABASE_URL`), required.
    public var databaseURL: String
    /// Address to listen on (`HOST`, default `0.0.0.0`; `::` for IPv6).
    public var host: String
    /// TCP port (`PORT`, default 8080; 0 picks a free port).
    public var port: Int
    /// Bearer token for admin endpoints (`ADTALLY_ADMIN_TOKEN`); nil refuses every admin request.
    public var adminToken: String?
    /// Database connections (`ADTALLY_DB_POOL_SIZE`, default 8).
    public var poolSize: Int
    /// One tap, one click: seconds within which a repeated click is a duplicate
    /// (`ADTALLY_CLICK_WINDOW_SECONDS`, default 30).
    public var clickWindowSeconds: Int
    /// A click naming an earlier snapshot of its session is judged against it when the tap lies
    /// within this many seconds of its time as the current one (`ADTALLY_CLICK_GRACE_SECONDS`,
    /// default 30; 0 turns the grace off).
    public var clickGraceSeconds: Int
    /// One tap, one click, across ads: a click less than this many milliseconds (by the client's
    /// clock) from the session's last accepted click on another ad is a duplicate
    /// (`ADTALLY_TAP_WINDOW_MS`, default 1000; 0 turns the rule off).
    public var tapWindowMilliseconds: Int
    /// Raw events are kept at least this many days after `received_at`, then their day's partition
    /// is dropped (`ADTALLY_EVENTS_RETENTION_DAYS`, default 90; at least 8, so that a replay within
    /// rule 1's 7 days still finds its original outcome).
    public var eventsRetentionDays: Int = 90
    /// A session with no snapshot registered and no event received for this many days is forgotten
    /// (`ADTALLY_SESSION_TTL_DAYS`, default 30; at least 8: rule 1 accepts events 7 days old).
    public var sessionTTLDays: Int = 30
    /// How often a serving process runs maintenance (`ADTALLY_MAINTENANCE_INTERVAL_SECONDS`,
    /// default 60; 0: never, run `adtally maintain` from a scheduler instead).
    public var maintenanceIntervalSeconds: Int = 60
    /// Rule 4's settings.
    public var clickRule: ClickRule {
        ClickRule(windowSeconds: clickWindowSeconds, graceSeconds: clickGraceSeconds, tapWindowMilliseconds: tapWindowMilliseconds)
    }
    /// Lowest level written to the log (`LOG_LEVEL`, default `info`).
    public var logLevel: LogLevel
    /// Whether each statement is prepared once per connection (`ADTALLY_DB_PREPARED_STATEMENTS`,
    /// default on). Off behind a pooler in transaction mode (pgbouncer), where the next transaction
    /// may run on a server connection that never saw the `PREPARE`.
    public var preparedStatements = true
    /// Seconds a statement on the primary may go without the server's answer before its connection
    /// is given up and the request answered `503` (`ADTALLY_DB_ANSWER_TIMEOUT_SECONDS`, default 5):
    /// how a hung primary, which resets no connection, is left for the promoted standby.
    public var answerTimeoutSeconds = 5
    /// Where reports and feed reads go (`ADTALLY_REPORTS_DATABASE_URL`, optional): a hot standby, so
    /// that billing's queries never load the primary. nil: they read from `databaseURL`.
    public var reportsDatabaseURL: String?
    /// Connections of the reports pool (`ADTALLY_REPORTS_DB_POOL_SIZE`, default 4).
    public var reportsPoolSize = 4

    /// Defaults of every optional setting.
    public static let defaults = Configuration(
        databaseURL: "", host: "0.0.0.0", port: 8080, adminToken: nil, poolSize: 8, clickWindowSeconds: 30,
        clickGraceSeconds: 30, tapWindowMilliseconds: 1_000, logLevel: .info
    )

    public init(databaseURL: String, host: String, port: Int, adminToken: String?, poolSize: Int, clickWindowSeconds: Int,
                clickGraceSeconds: Int = 30, tapWindowMilliseconds: Int = 1_000, logLevel: LogLevel) {
        self.databaseURL = databaseURL
        self.host = host
        self.port = port
        self.adminToken = adminToken
        self.poolSize = poolSize
        self.clickWindowSeconds = clickWindowSeconds
        self.clickGraceSeconds = clickGraceSeconds
        self.tapWindowMilliseconds = tapWindowMilliseconds
        self.logLevel = logLevel
    }

    /// Every variable, its default and meaning, for `--help` and the README.
    public static let variables: [(name: String, help: String)] = [
        ("DATABASE_URL", "PostgreSQL connection string or URI (required), e.g. postgresql://user:pass@db:5432/adtally"),
        ("HOST", "address to listen on (default 0.0.0.0; :: for IPv6)"),
        ("PORT", "TCP port to listen on, 0-65535 (default 8080)"),
        ("ADTALLY_ADMIN_TOKEN", "bearer token for admin endpoints; unset: every admin request is refused with 401"),
        ("ADTALLY_DB_POOL_SIZE", "database connections per process, 1-1000 (default 8)"),
        ("ADTALLY_CLICK_WINDOW_SECONDS", "repeated clicks on an ad within this many seconds are duplicates, 0-86400 (default 30)"),
        ("ADTALLY_CLICK_GRACE_SECONDS", "a click naming an earlier snapshot is judged against it when tapped within this many seconds of its time as current, 0-3600 (default 30; 0: off)"),
        ("ADTALLY_EVENTS_RETENTION_DAYS", "raw events are kept at least this many days, then dropped a day at a time; 8-36500 (default 90)"),
        ("ADTALLY_SESSION_TTL_DAYS", "a session with no snapshot and no event for this many days is forgotten; 8-36500 (default 30)"),
        ("ADTALLY_MAINTENANCE_INTERVAL_SECONDS", "how often this process runs maintenance (partitions, rollups, retention); 0-86400, 0: never (default 60)"),
        ("ADTALLY_TAP_WINDOW_MS", "a click this close (client clock) to the session's last accepted click on another ad is a duplicate, 0-60000 (default 1000; 0: off)"),
        ("ADTALLY_DB_PREPARED_STATEMENTS", "on or off (default on): off behind a pooler in transaction mode such as pgbouncer"),
        ("ADTALLY_DB_ANSWER_TIMEOUT_SECONDS", "a statement on the primary unanswered this long gives its connection up (a hung server) and answers 503, 1-600 (default 5)"),
        ("ADTALLY_REPORTS_DATABASE_URL", "optional: reports and feed reads go there (a hot standby; several hosts allowed) instead of DATABASE_URL"),
        ("ADTALLY_REPORTS_DB_POOL_SIZE", "connections to the reports database per process, 1-1000 (default 4)"),
        ("LOG_LEVEL", "debug, info, warning or error (default info)"),
        ("ADTALLY_MIGRATIONS_DIR", "folder of NNNN_name.sql migrations (default: beside the binary, ./migrations, or the source tree)"),
    ]

    /// Reads and validates the environment. `requireDatabase` is false for commands that do not
    /// touch the database.
    public static func fromEnvironment(_ environment: [String: String], requireDatabase: Bool = true) throws(ConfigurationError) -> Configuration {
        var configuration = Configuration.defaults
        func value(_ name: String) -> String? {
            guard let raw = environment[name] else { return nil }
            let trimmed = raw.trimmingCharacters(in: .whitespaces)
            return trimmed.isEmpty ? nil : trimmed
        }
        func integer(_ name: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
            guard let text = value(name) else { return nil }
            guard text.allSatisfy(\.isASCII), let number = Int(text), range.contains(number) else {
                throw ConfigurationError(variable: name, message: "must be an integer from \(range.lowerBound) to \(range.upperBound), got \"\(text.prefix(40))\"")
            }
            return number
        }
        if let url = environment["DATABASE_URL"], !url.trimmingCharacters(in: .whitespaces).isEmpty {
            configuration.databaseURL = url
        } else if requireDatabase {
            throw ConfigurationError(variable: "DATABASE_URL", message: "is not set; give a PostgreSQL URI such as postgresql://user@localhost:5432/adtally")
        }
        if let host = value("HOST") {
            guard host.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw ConfigurationError(variable: "HOST", message: "must be an IP address or host name, got \"\(host.prefix(40))\"")
            }
            configuration.host = host
        }
        if let port = try integer("PORT", 0...65535) { configuration.port = port }
        if let token = environment["ADTALLY_ADMIN_TOKEN"], !token.isEmpty {
            guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw ConfigurationError(variable: "ADTALLY_ADMIN_TOKEN", message: "must be visible ASCII without spaces (it travels in an HTTP header)")
            }
            configuration.adminToken = token
        }
        if let size = try integer("ADTALLY_DB_POOL_SIZE", 1...1000) { configuration.poolSize = size }
        if let window = try integer("ADTALLY_CLICK_WINDOW_SECONDS", 0...86_400) { configuration.clickWindowSeconds = window }
        if let grace = try integer("ADTALLY_CLICK_GRACE_SECONDS", 0...3_600) { configuration.clickGraceSeconds = grace }
        if let tap = try integer("ADTALLY_TAP_WINDOW_MS", 0...60_000) { configuration.tapWindowMilliseconds = tap }
        if let days = try integer("ADTALLY_EVENTS_RETENTION_DAYS", 8...36_500) { configuration.eventsRetentionDays = days }
        if let days = try integer("ADTALLY_SESSION_TTL_DAYS", 8...36_500) { configuration.sessionTTLDays = days }
        if let seconds = try integer("ADTALLY_MAINTENANCE_INTERVAL_SECONDS", 0...86_400) { configuration.maintenanceIntervalSeconds = seconds }
        if let prepared = value("ADTALLY_DB_PREPARED_STATEMENTS") {
            switch prepared.lowercased() {
            case "on", "true", "1": configuration.preparedStatements = true
            case "off", "false", "0": configuration.preparedStatements = false
            default:
                throw ConfigurationError(variable: "ADTALLY_DB_PREPARED_STATEMENTS", message: "must be on or off, got \"\(prepared.prefix(40))\"")
            }
        }
        if let timeout = try integer("ADTALLY_DB_ANSWER_TIMEOUT_SECONDS", 1...600) { configuration.answerTimeoutSeconds = timeout }
        if let url = value("ADTALLY_REPORTS_DATABASE_URL") { configuration.reportsDatabaseURL = url }
        if let size = try integer("ADTALLY_REPORTS_DB_POOL_SIZE", 1...1000) { configuration.reportsPoolSize = size }
        if let level = value("LOG_LEVEL") {
            guard let parsed = LogLevel(rawValue: level.lowercased()) else {
                throw ConfigurationError(variable: "LOG_LEVEL", message: "must be one of debug, info, warning, error, got \"\(level.prefix(40))\"")
            }
            configuration.logLevel = parsed
        }
        return configuration
    }
}

/// A setting that stops the start; its description is the one line the operator sees.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    /// The environment variable to fix.
    public let variable: String
    /// What is wrong with it.
    public let message: String

    public init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }

    public var description: String { "\(variable) \(message)" }
}
