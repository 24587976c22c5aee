import AdTally
import AdTallyApp
import HTTPServer
import Testing

@Suite(.timeLimit(.minutes(3))) struct ConfigurationTests {
    @Test func defaultsApply() throws {
        let configuration = try Configuration.fromEnvironment(["DATABASE_URL": "postgresql://x@localhost/db"])
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 8080)
        #expect(configuration.poolSize == 8)
        #expect(configuration.clickWindow == .seconds(30))
        #expect(configuration.logLevel == .info)
        #expect(configuration.adminTokens.isEmpty && configuration.feedTokens.isEmpty && configuration.reportTokens.isEmpty)
        #expect(configuration.clientLimits == ClientLimits.Settings(eventsPerSecond: 1_000, eventBurst: 20_000, maxConnections: 1_000,
                                                                    authFailuresPerMinute: 20))
        #expect(configuration.maxBufferedBytes == 256 * 1024 * 1024)
    }

    @Test func valuesAreRead() throws {
        let configuration = try Configuration.fromEnvironment([
            "DATABASE_URL": "host=/tmp dbname=x", "HOST": "::1", "PORT": "9090", "ADTALLY_ADMIN_TOKEN": "s3cret-admin-token",
            "ADTALLY_DB_POOL_SIZE": "16", "ADTALLY_CLICK_WINDOW_SECONDS": "5", "LOG_LEVEL": "DEBUG",
        ])
        var expected = Configuration()
        expected.databaseURL = "host=/tmp dbname=x"
        expected.host = "::1"
        expected.port = 9090
        expected.adminTokens = ["s3cret-admin-token"]
        expected.poolSize = 16
        expected.clickWindow = .seconds(5)
        expected.logLevel = .debug
        #expect(configuration == expected)
    }

    @Test(arguments: [
        ("PORT", "80a"), ("PORT", "70000"), ("PORT", "-1"), ("ADTALLY_DB_POOL_SIZE", "0"), ("ADTALLY_DB_POOL_SIZE", "many"),
        ("ADTALLY_CLICK_WINDOW_SECONDS", "-5"), ("ADTALLY_CLICK_WINDOW_SECONDS", "1.5"), ("LOG_LEVEL", "verbose"),
        ("ADTALLY_ADMIN_TOKEN", "has space in it"), ("ADTALLY_ADMIN_TOKEN", "short-token"), ("ADTALLY_FEED_TOKENS", "feed-token-0001, short"),
        ("ADTALLY_REPORT_TOKENS", "report token 01"), ("ADTALLY_CLIENT_EVENTS_PER_SECOND", "-1"), ("ADTALLY_CLIENT_EVENT_BURST", "0"),
        ("ADTALLY_CLIENT_MAX_CONNECTIONS", "lots"), ("ADTALLY_AUTH_FAILURES_PER_MINUTE", "1.5"), ("ADTALLY_MAX_BUFFERED_BYTES", "1024"),
        ("HOST", "two words"), ("ADTALLY_DB_PREPARED_STATEMENTS", "sometimes"),
        ("ADTALLY_DB_ANSWER_TIMEOUT_SECONDS", "0"), ("ADTALLY_DB_ANSWER_TIMEOUT_SECONDS", "601"), ("ADTALLY_REPORTS_DB_POOL_SIZE", "0"),
    ])
    func badValueNamesTheVariable(_ variable: String, _ value: String) {
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration.fromEnvironment(["DATABASE_URL": "postgresql://x@localhost/db", variable: value])
        }
        #expect(error?.variable == variable)
        #expect(error?.description.hasPrefix(variable) == true)
    }

    @Test func topologySettingsAreRead() throws {
        let defaults = try Configuration.fromEnvironment(["DATABASE_URL": "postgresql://x@db1,db2/db?target_session_attrs=read-write"])
        #expect(defaults.preparedStatements)
        #expect(defaults.answerTimeout == .seconds(5))
        #expect(defaults.reportsDatabaseURL == nil)
        #expect(defaults.reportsPoolSize == 4)
        let set = try Configuration.fromEnvironment([
            "DATABASE_URL": "postgresql://x@db1,db2/db", "ADTALLY_DB_PREPARED_STATEMENTS": "OFF",
            "ADTALLY_DB_ANSWER_TIMEOUT_SECONDS": "12", "ADTALLY_REPORTS_DATABASE_URL": "postgresql://r@db2,db1/db?target_session_attrs=prefer-standby",
            "ADTALLY_REPORTS_DB_POOL_SIZE": "2",
        ])
        #expect(!set.preparedStatements)
        #expect(set.answerTimeout == .seconds(12))
        #expect(set.reportsDatabaseURL == "postgresql://r@db2,db1/db?target_session_attrs=prefer-standby")
        #expect(set.reportsPoolSize == 2)
        #expect(try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_DB_PREPARED_STATEMENTS": "on"]).preparedStatements)
    }

    @Test func missingDatabaseURLIsNamed() {
        let error = #expect(throws: ConfigurationError.self) { try Configuration.fromEnvironment([:]) }
        #expect(error?.variable == "DATABASE_URL")
        #expect((try? Configuration.fromEnvironment([:], requireDatabase: false)) != nil)
    }

    /// API.md "Who calls what": each variable lists tokens (comma-separated, trimmed, empty entries
    /// ignored); a token under 12 characters or in two variables stops the start with one line
    /// naming the variable, and the line never shows the token.
    @Test func tokensAreListsCheckedAtStart() throws {
        let read = try Configuration.fromEnvironment([
            "DATABASE_URL": "x", "ADTALLY_ADMIN_TOKEN": " admin-token-0001 ,, admin-token-0002 ",
            "ADTALLY_FEED_TOKENS": "feed-token-0001", "ADTALLY_REPORT_TOKENS": "report-token-001,report-token-002,",
        ])
        #expect(read.adminTokens == ["admin-token-0001", "admin-token-0002"])
        #expect(read.feedTokens == ["feed-token-0001"])
        #expect(read.reportTokens == ["report-token-001", "report-token-002"])
        #expect(try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_ADMIN_TOKEN": " , "]).adminTokens.isEmpty)
        #expect(try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_ADMIN_TOKEN": "dev-admin-token"]).adminTokens == ["dev-admin-token"])

        let short = #expect(throws: ConfigurationError.self) {
            try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_REPORT_TOKENS": "report-token-001,eleven-char"])
        }
        #expect(short?.variable == "ADTALLY_REPORT_TOKENS")
        #expect(short?.description.contains("eleven-char") == false, "the error line shows the token")
        let twice = #expect(throws: ConfigurationError.self) {
            try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_ADMIN_TOKEN": "shared-token-0001",
                                               "ADTALLY_REPORT_TOKENS": "report-token-001, shared-token-0001"])
        }
        #expect(twice?.variable == "ADTALLY_REPORT_TOKENS")
        #expect(twice?.message.contains("ADTALLY_ADMIN_TOKEN") == true)
        #expect(twice?.description.contains("shared-token-0001") == false, "the error line shows the token")
        let feedAndReports = #expect(throws: ConfigurationError.self) {
            try Configuration.fromEnvironment(["DATABASE_URL": "x", "ADTALLY_FEED_TOKENS": "shared-token-0001",
                                               "ADTALLY_REPORT_TOKENS": "shared-token-0001"])
        }
        #expect(feedAndReports?.variable == "ADTALLY_REPORT_TOKENS")
    }

    @Test func limitsPerClientAreRead() throws {
        let set = try Configuration.fromEnvironment([
            "DATABASE_URL": "x", "ADTALLY_CLIENT_EVENTS_PER_SECOND": "0", "ADTALLY_CLIENT_EVENT_BURST": "500",
            "ADTALLY_CLIENT_MAX_CONNECTIONS": "10", "ADTALLY_AUTH_FAILURES_PER_MINUTE": "0", "ADTALLY_MAX_BUFFERED_BYTES": "1048576",
        ])
        #expect(set.clientLimits == ClientLimits.Settings(eventsPerSecond: 0, eventBurst: 500, maxConnections: 10, authFailuresPerMinute: 0))
        #expect(set.maxBufferedBytes == 1_048_576)
    }
}
