import AdTally
import Foundation
import HTTPServer
import Runtime
import Timestamps

/// Everything AdTally reads from its environment (twelve-factor), validated at start so that a bad
/// value stops the process with one line naming the variable instead of failing later.
///
/// Each setting is declared once, in `settings`: its variable, where it goes here, its form and
/// range, its help, and which part of the service reads it. Parsing, `adtally --help` and the
/// configuration reference (`docs/CONFIGURATION.md`, checked against this table by a test) all come
/// from that one entry; the defaults are the initial values of the properties below.
public struct Configuration: Sendable, Equatable {
    /// libpq connection string or URI, required.
    public var databaseURL = ""
    /// Address to listen on (`::` for IPv6).
    public var host = "0.0.0.0"
    /// TCP port (0 picks a free port).
    public var port = 8080
    /// Bearer tokens with every scope (`ADTALLY_ADMIN_TOKEN`: one or several, for rotation). With
    /// no token in any of the three lists, every admin request is refused.
    public var adminTokens: [String] = []
    /// Bearer tokens with the `feed` scope: register and read feeds.
    public var feedTokens: [String] = []
    /// Bearer tokens with the `reports` scope: reports, reading feeds, the dashboard's data.
    public var reportTokens: [String] = []
    /// Database connections of this process.
    public var poolSize = 8
    /// One tap, one click: a repeated click on an ad within this is a duplicate.
    public var clickWindow: Duration = .seconds(30)
    /// A click naming an earlier snapshot of its session is judged against it when the tap lies
    /// within this of its time as the current one; zero turns the grace off.
    public var clickGrace: Duration = .seconds(30)
    /// One tap, one click, across ads: a click this close (client clock) to the session's last
    /// accepted click on another ad is a duplicate; zero turns the rule off.
    public var tapWindow: Duration = .milliseconds(1_000)
    /// Raw events are kept at least this long after `received_at`, then their day's partition is
    /// dropped (at least 8 days: a replay within rule 1's 7 days must find its first answer).
    public var eventsRetention: Duration = .days(90)
    /// A session with no snapshot registered and no event received for this long is forgotten (at
    /// least 8 days: rule 1 accepts events 7 days old).
    public var sessionTTL: Duration = .days(30)
    /// How often a serving process runs maintenance; zero: never (run `adtally maintain` instead).
    public var maintenanceInterval: Duration = .seconds(60)
    /// Every statement of maintenance is given up and cancelled on the server after this long.
    public var maintenanceStatementTimeout: Duration = .seconds(300)
    /// A report listing that the client has not read whole within this long is ended (truncated)
    /// and its transaction closed, so that no reader holds a connection of the primary for long.
    public var reportMaxDuration: Duration = .seconds(300)
    /// Lowest level written to the log.
    public var logLevel: LogLevel = .info
    /// Whether each statement is prepared once per connection: off behind a pooler in transaction
    /// mode (pgbouncer), where the next transaction may run on a server connection that never saw
    /// the `PREPARE`.
    public var preparedStatements = true
    /// How long a statement on the primary may go without the server's answer before its
    /// connection is given up and the request answered `503`: how a hung primary, which resets no
    /// connection, is left for the promoted standby.
    public var answerTimeout: Duration = .seconds(5)
    /// Where reports and feed reads go: a hot standby, so that billing's queries never load the
    /// primary. nil: they read from `databaseURL`.
    public var reportsDatabaseURL: String?
    /// Connections of the reports pool.
    public var reportsPoolSize = 4
    /// On Citus: each session's events are stored on the node that holds its shard
    /// (`ShardRouter`); off: every transaction goes through `databaseURL`'s node.
    public var citusRouting = true
    /// The folder of the migrations; nil: found beside the binary, in `./migrations` or in the
    /// source tree (`Migration.locateDirectory`).
    public var migrationsDirectory: String?
    /// Proxies whose `X-Forwarded-For` names the client (API.md, "The client address").
    public var trustedProxies = AddressRanges()
    /// A click needs its ad's counted impression in the session (`no_impression`); off restores the
    /// earlier rule.
    public var clickNeedsImpression = true
    /// Accepted clicks per session and UTC clock hour (`click_limit_exceeded` past it); 0: no limit.
    public var sessionClickLimit = 20
    /// The file of bot `User-Agent` patterns (`bot_agent`); nil: no agent filter.
    public var botAgentsFile: String?
    /// The file of blocked addresses and ranges (`blocked_address`); nil: no address filter.
    public var blockedAddressesFile: String?
    /// Events per second refilling each client's bucket (API.md section 6); 0: no events limit.
    public var clientEventsPerSecond = 1_000
    /// The size of each client's events bucket.
    public var clientEventBurst = 20_000
    /// Open connections per client (TCP peer) before `429`; 0: no cap.
    public var clientMaxConnections = 1_000
    /// `401`s per client and UTC minute before every admin request of that minute is `429`; 0: off.
    public var authFailuresPerMinute = 20
    /// Bytes of request bodies all connections together may hold in memory.
    public var maxBufferedBytes = 256 * 1024 * 1024

    /// Every default.
    public init() {}

    /// The environment variable of the setting stored at `keyPath`, from its declaration in
    /// `settings`.
    public static func variable(of keyPath: PartialKeyPath<Configuration>) -> String {
        guard let setting = settings.first(where: { $0.keyPath == keyPath }) else {
            // A programmer error: every key path code asks about is a setting's
            // (`ConfigurationTests` asks about each of them).
            preconditionFailure("\(keyPath) is not a declared setting")
        }
        return setting.name
    }

    /// The limits per client (API.md section 6).
    public var clientLimits: ClientLimits.Settings {
        ClientLimits.Settings(eventsPerSecond: clientEventsPerSecond, eventBurst: clientEventBurst, maxConnections: clientMaxConnections,
                              authFailuresPerMinute: authFailuresPerMinute)
    }

    /// Every token, each with its scopes.
    var accessTokens: AccessTokens {
        AccessTokens(admin: adminTokens, feed: feedTokens, reports: reportTokens)
    }

    /// Rule 4's settings.
    public var clickRule: ClickRule {
        ClickRule(windowSeconds: clickWindow.wholeSeconds, graceSeconds: clickGrace.wholeSeconds,
                  tapWindowMilliseconds: tapWindow.wholeMilliseconds, needsImpression: clickNeedsImpression,
                  sessionClickLimit: sessionClickLimit)
    }

    /// Every setting, in the order `--help` and the reference list them.
    public static let settings: [Setting] = [
        .text("DATABASE_URL", \.databaseURL, required: true, readBy: .database,
              help: "PostgreSQL connection string or URI, e.g. postgresql://user:pass@db:5432/adtally; several hosts (db1,db2) follow the primary through a failover"),
        .text("HOST", \.host, form: .hostName, readBy: .http, help: "address to listen on; :: for IPv6"),
        .integer("PORT", \.port, 0...65_535, readBy: .http, help: "TCP port to listen on; 0 picks a free one"),
        .tokens("ADTALLY_ADMIN_TOKEN", \.adminTokens, readBy: .security,
                help: "bearer tokens with every scope (feeds, reports), comma-separated; list two to rotate one; no token in any variable: every admin request is refused with 401"),
        .tokens("ADTALLY_FEED_TOKENS", \.feedTokens, readBy: .security,
                help: "bearer tokens with the feed scope (register and read feeds), comma-separated"),
        .tokens("ADTALLY_REPORT_TOKENS", \.reportTokens, readBy: .security,
                help: "bearer tokens with the reports scope (reports, reading feeds, the dashboard's data), comma-separated"),
        .integer("ADTALLY_DB_POOL_SIZE", \.poolSize, 1...1_000, readBy: .database, help: "database connections per process for requests (the advertiser keys' poll holds one more)"),
        .duration("ADTALLY_CLICK_WINDOW_SECONDS", \.clickWindow, unit: .seconds, 0...86_400, readBy: .rules,
                  help: "repeated clicks on an ad within this many seconds are duplicates"),
        .duration("ADTALLY_CLICK_GRACE_SECONDS", \.clickGrace, unit: .seconds, 0...3_600, readBy: .rules,
                  help: "a click naming an earlier snapshot is judged against it when tapped within this many seconds of its time as current; 0: off"),
        .duration("ADTALLY_TAP_WINDOW_MS", \.tapWindow, unit: .milliseconds, 0...60_000, readBy: .rules,
                  help: "a click this close (client clock) to the session's last accepted click on another ad is a duplicate; 0: off"),
        .toggle("ADTALLY_CLICK_NEEDS_IMPRESSION", \.clickNeedsImpression, readBy: .rules,
                help: "a click on an ad whose impression in the session was not counted is rejected, no_impression; off: the earlier rule"),
        .integer("ADTALLY_SESSION_CLICK_LIMIT", \.sessionClickLimit, 0...10_000, readBy: .rules,
                 help: "at most this many accepted clicks per session and UTC clock hour, the rest rejected, click_limit_exceeded; 0: no limit"),
        .optionalText("ADTALLY_BOT_AGENTS_FILE", \.botAgentsFile, readBy: .traffic,
                      help: "file of User-Agent patterns, one a line (# comments): a request whose agent contains one, in any case, has its events rejected, bot_agent; reloaded on SIGHUP"),
        .optionalText("ADTALLY_BLOCKED_ADDRESSES_FILE", \.blockedAddressesFile, readBy: .traffic,
                      help: "file of addresses and CIDR ranges, one a line (# comments): a request from one has its events rejected, blocked_address; reloaded on SIGHUP"),
        .duration("ADTALLY_EVENTS_RETENTION_DAYS", \.eventsRetention, unit: .days, 8...36_500, readBy: .maintenance,
                  help: "raw events are kept at least this many days, then dropped a day at a time"),
        .duration("ADTALLY_SESSION_TTL_DAYS", \.sessionTTL, unit: .days, 8...36_500, readBy: .maintenance,
                  help: "a session with no snapshot and no event for this many days is forgotten"),
        .duration("ADTALLY_MAINTENANCE_INTERVAL_SECONDS", \.maintenanceInterval, unit: .seconds, 0...86_400, readBy: .maintenance,
                  help: "how often this process runs maintenance (partitions, rollups, retention); 0: never"),
        .duration("ADTALLY_MAINTENANCE_STATEMENT_TIMEOUT_SECONDS", \.maintenanceStatementTimeout, unit: .seconds, 1...86_400,
                  readBy: .maintenance,
                  help: "each statement of maintenance is given up and cancelled on the server after this many seconds; what it left is finished on the next run"),
        .duration("ADTALLY_REPORT_MAX_SECONDS", \.reportMaxDuration, unit: .seconds, 1...86_400, readBy: .reports,
                  help: "a report listing or event export that the client has not read whole within this many seconds is ended (truncated) and its transaction closed"),
        .toggle("ADTALLY_DB_PREPARED_STATEMENTS", \.preparedStatements, readBy: .database,
                help: "off behind a pooler in transaction mode such as pgbouncer"),
        .duration("ADTALLY_DB_ANSWER_TIMEOUT_SECONDS", \.answerTimeout, unit: .seconds, 1...600, readBy: .database,
                  help: "a statement on the primary unanswered this long gives its connection up (a hung server) and answers 503"),
        .optionalText("ADTALLY_REPORTS_DATABASE_URL", \.reportsDatabaseURL, readBy: .reports,
                      help: "reports and feed reads go there (a hot standby; several hosts allowed) instead of DATABASE_URL; "
                          + "required, naming the coordinator, when DATABASE_URL names a Citus worker (docs/SCALING.md)"),
        .integer("ADTALLY_REPORTS_DB_POOL_SIZE", \.reportsPoolSize, 1...1_000, readBy: .reports,
                 help: "connections to the reports database per process"),
        .toggle("ADTALLY_CITUS_ROUTING", \.citusRouting, readBy: .database,
                help: "on Citus: store each session's events on the node that holds its shard, connecting to every node by its address in pg_dist_node "
                    + "with DATABASE_URL's other settings; off: every event transaction through DATABASE_URL's node (docs/SCALING.md)"),
        .choice("LOG_LEVEL", \.logLevel, readBy: .logging, help: "lowest level written to the log"),
        .optionalText("ADTALLY_MIGRATIONS_DIR", \.migrationsDirectory, readBy: .migrations,
                      help: "folder of NNNN_name.sql migrations; unset: beside the binary, ./migrations or the source tree"),
        .addresses("ADTALLY_TRUSTED_PROXIES", \.trustedProxies, readBy: .traffic,
                   help: "proxies whose X-Forwarded-For names the client: comma-separated addresses and CIDR ranges, IPv4 and IPv6; empty: the TCP peer is the client"),
        .integer("ADTALLY_CLIENT_EVENTS_PER_SECOND", \.clientEventsPerSecond, 0...1_000_000, readBy: .traffic,
                 help: "events per second refilling each client address's bucket; a POST /v1/events costs its number of events, 429 when the bucket holds less; 0: no limit"),
        .integer("ADTALLY_CLIENT_EVENT_BURST", \.clientEventBurst, 1...10_000_000, readBy: .traffic,
                 help: "the size of each client address's events bucket (what it may send at once after a pause)"),
        .integer("ADTALLY_CLIENT_MAX_CONNECTIONS", \.clientMaxConnections, 0...1_000_000, readBy: .traffic,
                 help: "open connections per client address (TCP peer; trusted proxies are not counted); beyond, 429 and close; 0: no cap"),
        .integer("ADTALLY_AUTH_FAILURES_PER_MINUTE", \.authFailuresPerMinute, 0...1_000_000, readBy: .traffic,
                 help: "401 answers per client address in a UTC minute; beyond, every admin request of that minute gets 429; 0: off"),
        .integer("ADTALLY_MAX_BUFFERED_BYTES", \.maxBufferedBytes, 1_048_576...1_099_511_627_776, readBy: .http,
                 help: "request bodies all connections together may hold in memory; a body that would pass it waits for its turn, 503 after 5 s"),
    ]

    /// Reads and validates the environment. `requireDatabase` is false for commands that do not
    /// touch the database.
    public static func fromEnvironment(_ environment: [String: String], requireDatabase: Bool = true) throws(ConfigurationError) -> Configuration {
        var configuration = Configuration()
        for setting in settings {
            guard let raw = environment[setting.name] else {
                if setting.required && requireDatabase { throw ConfigurationError(variable: setting.name, message: setting.missingMessage) }
                continue
            }
            let value = setting.trimsSpaces ? raw.trimmingCharacters(in: .whitespaces) : raw
            if value.isEmpty {
                if setting.required && requireDatabase { throw ConfigurationError(variable: setting.name, message: setting.missingMessage) }
                continue
            }
            try setting.apply(value, &configuration)
        }
        try configuration.checkTokens()
        return configuration
    }

    /// The settings that hold bearer tokens, in the order their scopes widen to `admin`'s.
    static let tokenLists: [KeyPath<Configuration, [String]> & Sendable] = [\.adminTokens, \.feedTokens, \.reportTokens]

    /// The value of one setting in `environment`, its default when unset or not valid: for a
    /// command that needs that setting alone (`adtally healthcheck`'s port).
    public static func value<Value>(of keyPath: KeyPath<Configuration, Value> & Sendable, in environment: [String: String]) -> Value {
        var configuration = Configuration()
        if let setting = settings.first(where: { $0.keyPath == keyPath }), let raw = environment[setting.name] {
            let value = setting.trimsSpaces ? raw.trimmingCharacters(in: .whitespaces) : raw
            try? setting.apply(value, &configuration)
        }
        return configuration[keyPath: keyPath]
    }

    /// A token in two variables would have two sets of scopes: the start stops, naming the later one.
    func checkTokens() throws(ConfigurationError) {
        var owner: [String: String] = [:]
        for keyPath in Self.tokenLists {
            let name = Self.variable(of: keyPath)
            for token in self[keyPath: keyPath] {
                if let first = owner[token], first != name {
                    throw ConfigurationError(variable: name, message: "holds a token that \(first) holds too; a token belongs to one variable (its scopes)")
                }
                owner[token] = name
            }
        }
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
