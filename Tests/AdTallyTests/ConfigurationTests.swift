import AdTally
import Testing

@Suite(.timeLimit(.minutes(3))) struct ConfigurationTests {
    @Test func defaultsApply() throws {
        let configuration = try Configuration.fromEnvironment(["DATABASE_URL": "postgresql://x@localhost/db"])
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.port == 8080)
        #expect(configuration.poolSize == 8)
        #expect(configuration.clickWindow == .seconds(30))
        #expect(configuration.logLevel == .info)
        #expect(configuration.adminToken == nil)
    }

    @Test func valuesAreRead() throws {
        let configuration = try Configuration.fromEnvironment([
            "DATABASE_URL": "host=/tmp dbname=x", "HOST": "::1", "PORT": "9090", "ADTALLY_ADMIN_TOKEN": "s3cret",
            "ADTALLY_DB_POOL_SIZE": "16", "ADTALLY_CLICK_WINDOW_SECONDS": "5", "LOG_LEVEL": "DEBUG",
        ])
        var expected = Configuration()
        expected.databaseURL = "host=/tmp dbname=x"
        expected.host = "::1"
        expected.port = 9090
        expected.adminToken = "s3cret"
        expected.poolSize = 16
        expected.clickWindow = .seconds(5)
        expected.logLevel = .debug
        #expect(configuration == expected)
    }

    @Test(arguments: [
        ("PORT", "80a"), ("PORT", "70000"), ("PORT", "-1"), ("ADTALLY_DB_POOL_SIZE", "0"), ("ADTALLY_DB_POOL_SIZE", "many"),
        ("ADTALLY_CLICK_WINDOW_SECONDS", "-5"), ("ADTALLY_CLICK_WINDOW_SECONDS", "1.5"), ("LOG_LEVEL", "verbose"),
        ("ADTALLY_ADMIN_TOKEN", "has space"), ("HOST", "two words"), ("ADTALLY_DB_PREPARED_STATEMENTS", "sometimes"),
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
}
