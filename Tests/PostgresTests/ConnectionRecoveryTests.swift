import Dispatch
import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

/// A failed statement must not poison its connection: after any error, the same connection (or,
/// when its state cannot be known, the pool's replacement for it) answers every statement correctly.
@Suite(.timeLimit(.minutes(5))) struct ConnectionRecoveryTests {
    /// A table with known rows, and statements of several shapes already prepared on `connection`.
    static func prepared(_ connection: PostgresConnection) throws {
        try connection.execute("CREATE TABLE ads (ad_id text PRIMARY KEY, advertiser_id text NOT NULL)")
        for (ad, advertiser) in [("ad-1", "acme"), ("ad-2", "globex"), ("ad-3", "acme")] {
            try connection.query("INSERT INTO ads VALUES ($1, $2)", [ad, advertiser])
        }
        try expectAnswersEverything(connection)
    }

    /// Old and new statements alike answer what the rows say.
    static func expectAnswersEverything(_ connection: PostgresConnection, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try connection.query("SELECT count(*) FROM ads").first?.decode(Int.self, at: 0) == 3, sourceLocation: sourceLocation)
        #expect(try connection.query("SELECT advertiser_id FROM ads WHERE ad_id = $1", ["ad-2"]).first?.decode(String.self, at: 0) == "globex",
                sourceLocation: sourceLocation)
        #expect(try connection.query("SELECT * FROM ads WHERE ad_id = $1", ["ad-3"]).first?.decode(String.self, at: 1) == "acme",
                sourceLocation: sourceLocation)
        #expect(try connection.query("SELECT count(*) FROM ads WHERE advertiser_id = $1", ["acme"]).first?.decode(Int.self, at: 0) == 2,
                sourceLocation: sourceLocation)
        // A statement never sent before gets a name of its own.
        let fresh = "SELECT $1::int + \(Int.random(in: 1...1_000_000)) - count(*) FROM ads"
        #expect(try connection.query(fresh, [3]).first?.decode(Int.self, at: 0) != nil, sourceLocation: sourceLocation)
        #expect(!connection.isInTransaction, sourceLocation: sourceLocation)
    }

    /// `FOR UPDATE` with an aggregate: SQLSTATE 0A000 that has nothing to do with cached plans.
    static let unsupported = "SELECT count(*) FROM ads FOR UPDATE"

    @Test func featureNotSupportedInsideATransactionFailsItAndNothingElse() throws {
        let connection = try TestDatabase.create().connect()
        try Self.prepared(connection)
        for _ in 0..<3 {
            let error = #expect(throws: PostgresError.self) {
                try connection.withTransaction { connection in
                    try connection.query("SELECT count(*) FROM ads")
                    try connection.query(Self.unsupported)
                }
            }
            #expect(error?.sqlState == SQLState.featureNotSupported)
            #expect(error?.isCachedPlanChanged == false)
            #expect(error?.isTransientTransactionFailure == false)
            #expect(error?.kind == .statementFailed)
            try Self.expectAnswersEverything(connection)
            #expect(connection.isUsable)
        }
    }

    @Test func featureNotSupportedOutsideATransactionLeavesTheConnectionWhole() throws {
        let connection = try TestDatabase.create().connect()
        try Self.prepared(connection)
        for _ in 0..<3 {
            let error = #expect(throws: PostgresError.self) { try connection.query(Self.unsupported) }
            #expect(error?.sqlState == SQLState.featureNotSupported)
            #expect(error?.isCachedPlanChanged == false)
            try Self.expectAnswersEverything(connection)
        }
    }

    /// An online migration changes a column's type under a prepared statement.
    static func alterUnder(_ database: TestDatabase, type: String) throws {
        let migrator = try database.connect()
        defer { migrator.close() }
        try migrator.execute("ALTER TABLE ads ALTER COLUMN advertiser_id TYPE \(type)")
    }

    @Test func cachedPlanChangedOutsideATransactionIsPreparedAgain() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try Self.prepared(connection)
        try Self.alterUnder(database, type: "varchar(300)")
        // The statement whose result type changed answers, once prepared again, with no error.
        for _ in 0..<20 {
            #expect(try connection.query("SELECT * FROM ads WHERE ad_id = $1", ["ad-1"]).first?.decode(String.self, at: 1) == "acme")
        }
        try Self.expectAnswersEverything(connection)
        // And again after a second change.
        try Self.alterUnder(database, type: "text")
        try Self.expectAnswersEverything(connection)
    }

    @Test func cachedPlanChangedInsideATransactionFailsItAsTransient() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try Self.prepared(connection)
        try Self.alterUnder(database, type: "varchar(300)")
        let error = #expect(throws: PostgresError.self) {
            try connection.withTransaction { connection in
                try connection.query("INSERT INTO ads VALUES ($1, $2)", ["ad-9", "initech"])
                try connection.query("SELECT * FROM ads WHERE ad_id = $1", ["ad-1"])
            }
        }
        #expect(error?.isCachedPlanChanged == true)
        #expect(error?.isTransientTransactionFailure == true)
        #expect(error?.location?.hasPrefix("ConnectionRecoveryTests.swift:") == true)
        // The transaction was lost as a whole; run again on the clean state, it succeeds.
        #expect(try connection.query("SELECT count(*) FROM ads WHERE ad_id = $1", ["ad-9"]).first?.decode(Int.self, at: 0) == 0)
        let advertiser = try connection.withTransaction { connection in
            try connection.query("SELECT * FROM ads WHERE ad_id = $1", ["ad-1"]).first?.decode(String.self, at: 1)
        }
        #expect(advertiser == "acme")
        try Self.expectAnswersEverything(connection)
    }

    @Test func aStatementRefusedAfterAFailureNamesTheFirstFailure() throws {
        let connection = try TestDatabase.create().connect()
        try Self.prepared(connection)
        let error = #expect(throws: PostgresError.self) {
            try connection.withTransaction { connection in
                _ = try? connection.query(Self.unsupported)
                try connection.query("SELECT count(*) FROM ads")
            }
        }
        #expect(error?.sqlState == SQLState.inFailedTransaction)
        let first = try #require(error?.firstFailure)
        #expect(first.contains(SQLState.featureNotSupported))
        #expect(first.contains("ConnectionRecoveryTests.swift:"))
        #expect(error?.description.contains(first) == true)
        try Self.expectAnswersEverything(connection)
        // A later transaction starts with no memory of that one.
        let later = #expect(throws: PostgresError.self) {
            try connection.withTransaction { connection in
                _ = try? connection.query("SELECT 1/0")
                try connection.query("SELECT 1")
            }
        }
        #expect(later?.firstFailure?.contains("22012") == true)
        #expect(later?.firstFailure?.contains(SQLState.featureNotSupported) == false)
    }

    @Test func aPoolOfOneServesThroughAnOnlineMigration() throws {
        let database = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: database.connectionString, size: 1))
        defer { pool.shutdown() }
        try pool.withConnection { try Self.prepared($0) }
        try Self.alterUnder(database, type: "varchar(300)")
        for _ in 0..<20 {
            let advertiser = try pool.withConnection { connection in
                try connection.query("SELECT * FROM ads WHERE ad_id = $1", ["ad-2"]).first?.decode(String.self, at: 1)
            }
            #expect(advertiser == "globex")
        }
        try pool.withConnection { try Self.expectAnswersEverything($0) }
    }

    @Test func aConnectionLeftInCopyIsReplaced() throws {
        let database = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: database.connectionString, size: 1))
        defer { pool.shutdown() }
        let firstBackend = try pool.withConnection { connection -> Int32 in
            try Self.prepared(connection)
            return connection.backendPID
        }
        let stuck = try pool.withConnection { connection -> Int32 in
            #expect(throws: PostgresError.self) { try connection.execute("COPY ads FROM STDIN") }
            #expect(!connection.isUsable)
            return connection.backendPID
        }
        #expect(stuck == firstBackend)
        #expect(pool.connectionsOpen == 0)
        let replacement = try pool.withConnection { connection -> Int32 in
            try Self.expectAnswersEverything(connection)
            return connection.backendPID
        }
        #expect(replacement != firstBackend)
    }

    @Test func aCommitRefusedByTheServerLeavesTheConnectionIdle() throws {
        let database = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: database.connectionString, size: 1))
        defer { pool.shutdown() }
        let backend = try pool.withConnection { connection -> Int32 in
            try Self.prepared(connection)
            try connection.execute("CREATE TABLE once (v int UNIQUE DEFERRABLE INITIALLY DEFERRED)")
            return connection.backendPID
        }
        let error = #expect(throws: PostgresError.self) {
            try pool.withTransaction { connection in
                try connection.query("INSERT INTO once VALUES ($1)", [1])
                try connection.query("INSERT INTO once VALUES ($1)", [1])
            }
        }
        #expect(error?.isUniqueViolation == true)
        #expect(error?.location?.contains("PostgresConnection+Transaction.swift") == true)  // the COMMIT refused it
        try pool.withConnection { connection in
            #expect(connection.backendPID == backend)
            try Self.expectAnswersEverything(connection)
            #expect(try connection.query("SELECT count(*) FROM once").first?.decode(Int.self, at: 0) == 0)
        }
    }

    @Test func aConnectionLostBeforeCommitIsReplacedAndNothingCommitted() throws {
        let database = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: database.connectionString, size: 1))
        defer { pool.shutdown() }
        let killer = try database.connect()
        let backend = try pool.withConnection { connection -> Int32 in
            try Self.prepared(connection)
            return connection.backendPID
        }
        let error = #expect(throws: PostgresError.self) {
            try pool.withTransaction { connection in
                try connection.query("INSERT INTO ads VALUES ($1, $2)", ["ad-9", "initech"])
                try killer.query("SELECT pg_terminate_backend($1)", [Int(try connection.connection().backendPID)])
            }
        }
        #expect(error?.isConnectionGone == true)
        #expect(pool.connectionsOpen == 0)
        try pool.withConnection { connection in
            #expect(connection.backendPID != backend)
            try Self.expectAnswersEverything(connection)
        }
    }

    @Test func aCancelledStatementLeavesTheConnectionWhole() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try Self.prepared(connection)
        // Inside a transaction: statement_timeout cancels the statement; the transaction is lost.
        let timedOut = #expect(throws: PostgresError.self) {
            try connection.withTransaction { connection in
                try connection.execute("SET LOCAL statement_timeout = '50ms'")
                try connection.query("SELECT pg_sleep(5)")
            }
        }
        #expect(timedOut?.sqlState == SQLState.queryCanceled)
        try Self.expectAnswersEverything(connection)
        // Outside one: another session cancels it while it runs.
        let canceller = try database.connect()
        let pid = connection.backendPID
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<PostgresError?>(nil)
        // A thread of its own, not a shared queue: it must start now, whatever other tests block.
        Thread {
            do {
                try connection.query("SELECT pg_sleep(30)")
            } catch let error as PostgresError {
                outcome.withLock { $0 = error }
            } catch {}
            done.signal()
        }.start()
        // Wait until the statement is running, then cancel it (polling its state, for 30 s at most).
        var cancelled = false
        let deadline = Date().addingTimeInterval(30)
        while !cancelled && Date() < deadline {
            let running = try canceller.query(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active' AND query LIKE '%pg_sleep(30)%'", [Int(pid)]
            ).first?.decode(Int.self, at: 0) == 1
            if running {
                cancelled = try canceller.query("SELECT pg_cancel_backend($1)", [Int(pid)]).first?.decode(Bool.self, at: 0) == true
            } else {
                usleep(5_000)
            }
        }
        #expect(cancelled)
        // The connection is used again only once the other thread is done with it.
        try #require(done.wait(timeout: .now() + .seconds(40)) == .success)
        #expect(outcome.withLock { $0 }?.sqlState == SQLState.queryCanceled)
        try Self.expectAnswersEverything(connection)
    }
}
