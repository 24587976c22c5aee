import Dispatch
import Foundation
import Postgres
import TestSupport
import Testing

/// API.md section 8 at the database layer, on real servers: a pool that follows the primary, a
/// hung server that costs at most the answer timeout, a server that stops accepting writes, and
/// pgbouncer in transaction mode.
@Suite(.serialized, .timeLimit(.minutes(5))) struct TopologyTests {
    static func primaryPool(_ url: String, size: Int = 3, answerTimeout: Duration? = .seconds(2),
                            prepared: Bool = true) -> PostgresPool {
        PostgresPool(configuration: .init(connectionString: url, size: size, acquireTimeout: .seconds(5), connectTimeoutSeconds: 1,
                                          usePreparedStatements: prepared, answerTimeout: answerTimeout,
                                          parameterDefaults: PostgresConnection.primaryDefaults))
    }

    @Test func aConnectionOnAServerThatRefusesWritesIsDroppedWithItsIdleNeighbours() throws {
        let db = try TestDatabase.create()
        let pool = Self.primaryPool(db.connectionString)
        defer { pool.shutdown() }
        try pool.withConnection { _ = try $0.execute("CREATE TABLE t (x int)") }
        // Three connections open, then idle.
        let opened = DispatchGroup()
        let hold = DispatchSemaphore(value: 0)
        for _ in 0..<3 {
            opened.enter()
            // Threads of their own: work queued on the shared pool, which this test's thread belongs
            // to, may not start while other tests block the pool's other threads.
            Thread {
                try? pool.withConnection { _ in opened.leave(); _ = hold.wait(timeout: .now() + 30) }
            }.start()
        }
        #expect(opened.wait(timeout: .now() + 30) == .success, "three borrowers did not get a connection each")
        for _ in 0..<3 { hold.signal() }
        #expect(poll(seconds: 5) { pool.connectionsInUse == 0 ? true : nil } == true)
        #expect(pool.connectionsOpen == 3)

        // What a fenced primary or a standby answers to a write: SQLSTATE 25006.
        let error = #expect(throws: PostgresError.self) {
            try pool.withConnection { connection in
                try connection.execute("SET default_transaction_read_only = on")
                try connection.query("INSERT INTO t VALUES (1)")
            }
        }
        #expect(error?.sqlState == SQLState.readOnlyTransaction)
        #expect(error?.kind == .serverReadOnly)
        #expect(error?.isConnectionGone == true)
        // Dropped, and so are the idle ones opened before it.
        #expect(pool.connectionsOpen == 0)
        #expect(pool.serverLosses == 1)
        try pool.withConnection { _ = try $0.query("INSERT INTO t VALUES (2)") }
        #expect(pool.connectionsOpen == 1)
    }

    @Test func aHungServerCostsABorrowerAtMostTheAnswerTimeout() throws {
        let cluster = try DisposableCluster()
        let pool = Self.primaryPool(cluster.connectionString, size: 4, answerTimeout: .seconds(1))
        defer { pool.shutdown() }
        try pool.withConnection { _ = try $0.execute("CREATE TABLE t (x int)") }
        // Several idle connections, all to the server about to hang: four borrowers on threads of
        // their own (a shared queue may run them one after another on one thread while other tests
        // block the pool, and one connection would do) hold their connections until all have one.
        let group = DispatchGroup()
        let borrowed = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<4 {
            group.enter()
            Thread {
                try? pool.withConnection { _ in
                    borrowed.signal()
                    _ = release.wait(timeout: .now() + 30)
                    release.signal()
                }
                group.leave()
            }.start()
        }
        let deadline = DispatchTime.now() + 30
        let allBorrowed = (0..<4).allSatisfy { _ in borrowed.wait(timeout: deadline) == .success }
        release.signal()
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(allBorrowed, "four borrowers did not get a connection each")
        #expect(pool.connectionsOpen >= 2)

        try cluster.signal("STOP")
        defer { try? cluster.signal("CONT") }
        let started = ContinuousClock.now
        let hung = #expect(throws: PostgresError.self) { try pool.withConnection { _ = try $0.query("INSERT INTO t VALUES (1)") } }
        #expect(hung?.kind == .connectionLost)
        #expect(ContinuousClock.now - started < .seconds(3), "gave up after \(ContinuousClock.now - started)")
        // The other idle connections were retired with it: the next borrower does not wait on
        // another hung connection, it tries to connect (and fails within connect_timeout).
        let next = ContinuousClock.now
        let refused = #expect(throws: PostgresError.self) { try pool.withConnection { _ = try $0.query("SELECT 1") } }
        #expect(refused?.kind == .connectionFailed)
        #expect(ContinuousClock.now - next < .seconds(4), "second borrow took \(ContinuousClock.now - next)")

        try cluster.signal("CONT")
        let back = poll(seconds: 10) { () -> Bool? in
            (try? pool.withConnection { try $0.query("INSERT INTO t VALUES (2)") }) != nil ? true : nil
        }
        #expect(back == true)
    }

    @Test func aMultiHostPoolFollowsThePromotedStandby() throws {
        let primary = try DisposableCluster()
        let standby = try primary.makeStandby()
        let url = "postgresql://postgres@127.0.0.1:\(primary.port),127.0.0.1:\(standby.port)/adtally"
        let pool = Self.primaryPool(url)
        defer { pool.shutdown() }
        let port = { try pool.withConnection { try $0.query("SELECT inet_server_port()").first?.decode(Int.self, at: 0) } }
        try pool.withConnection { _ = try $0.execute("CREATE TABLE t (x int)") }
        #expect(try port() == primary.port)
        try primary.waitUntilReplayed(by: standby)

        try primary.signal("KILL")
        // No primary: a clear failure, quickly (the standby refuses: it is read-only).
        let started = ContinuousClock.now
        let refused = #expect(throws: PostgresError.self) { try pool.withConnection { _ = try $0.query("INSERT INTO t VALUES (1)") } }
        #expect(refused?.isConnectionGone == true)
        #expect(ContinuousClock.now - started < .seconds(5))

        try standby.promote()
        let promoted = ContinuousClock.now
        let written = poll(seconds: 10) { () -> Bool? in
            (try? pool.withConnection { try $0.query("INSERT INTO t VALUES (2)") }) != nil ? true : nil
        }
        #expect(written == true, "no write within 10 s of the promotion")
        #expect(ContinuousClock.now - promoted < .seconds(10))
        #expect(try port() == standby.port)
    }

    // MARK: pgbouncer in transaction mode

    /// Two clients of one pgbouncer: `holder` keeps a server connection busy in a transaction, so
    /// `client`'s next transaction runs on another server connection than its last one.
    static func onAnotherServerConnection(_ holder: PostgresConnection, _ body: () throws -> Void) throws {
        try holder.execute("BEGIN")
        try holder.query("SELECT 1")
        defer { _ = try? holder.execute("ROLLBACK") }
        try body()
    }

    @Test func preparedStatementsDoNotOutliveATransactionBehindPgbouncerSoTheyCanBeTurnedOff() throws {
        let db = try TestDatabase.create()
        let bouncer = try Pgbouncer(inFrontOf: try TestDatabase.serverConnectionString())
        let url = bouncer.connectionString(database: db.name)

        // The control: with statements prepared per connection, the next transaction lands on a
        // server connection that never saw the PREPARE.
        let prepared = try PostgresConnection(connectionString: url)
        let holder = try PostgresConnection(connectionString: url, usePreparedStatements: false)
        try prepared.query("SELECT $1::int", [1])
        let broken = #expect(throws: PostgresError.self) {
            try Self.onAnotherServerConnection(holder) { try prepared.query("SELECT $1::int", [2]) }
        }
        #expect(broken?.sqlState == "26000", "expected 'prepared statement does not exist', got \(String(describing: broken))")

        // Unnamed statements: every one is parsed where it runs, single or pipelined.
        let unnamed = try PostgresConnection(connectionString: url, usePreparedStatements: false)
        try unnamed.query("SELECT $1::int", [1])
        try Self.onAnotherServerConnection(holder) {
            #expect(try unnamed.query("SELECT $1::int", [2]).first?.decode(Int.self, at: 0) == 2)
            var pipeline = PostgresPipeline()
            pipeline.add("BEGIN")
            let sum = pipeline.add(PostgresQuery(unsafeRawSQL: "SELECT $1::int + 1", binds: [2]))
            pipeline.add("COMMIT")
            let results = try unnamed.run(pipeline)
            #expect(try results[sum].first?.decode(Int.self, at: 0) == 3)
        }
    }
}
