import Dispatch
import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct PoolTests {
    @Test func moreUsersThanConnections() throws {
        let db = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: db.connectionString, size: 3, acquireTimeout: .seconds(30)))
        defer { pool.shutdown() }
        _ = try pool.withConnection { try $0.execute("CREATE TABLE hits (worker int, backend int)") }
        let failures = Atomic<Int>(0)
        let peakInUse = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 24) { worker in
            do {
                try pool.withConnection { connection in
                    peakInUse.max(pool.connectionsInUse, ordering: .relaxed)
                    // Hold the connection inside the server so that borrowers really overlap.
                    try connection.query("SELECT pg_sleep(0.02)")
                    try connection.query("INSERT INTO hits VALUES ($1, pg_backend_pid())", [worker])
                }
            } catch {
                failures.add(1, ordering: .relaxed)
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        let row = try #require(try pool.withConnection { try $0.query("SELECT count(*), count(DISTINCT backend) FROM hits").first })
        #expect(try row.decode(Int.self, at: 0) == 24)
        #expect(try row.decode(Int.self, at: 1) <= 3)
        #expect(peakInUse.load(ordering: .relaxed) <= 3)
        #expect(pool.connectionsOpen <= 3)
        #expect(pool.connectionsInUse == 0)
    }

    @Test func waitIsBounded() throws {
        let db = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: db.connectionString, size: 1, acquireTimeout: .milliseconds(200)))
        defer { pool.shutdown() }
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // A thread of its own: work queued on the shared pool, which this test's thread belongs to,
        // may not start while other tests block the pool's other threads.
        Thread {
            try? pool.withConnection { _ in
                holding.signal()
                _ = release.wait(timeout: .now() + 30)
            }
        }.start()
        try #require(holding.wait(timeout: .now() + 30) == .success, "the first borrower never got the connection")
        let started = ContinuousClock.now
        let error = #expect(throws: PostgresError.self) { try pool.withConnection { _ in } }
        let waited = ContinuousClock.now - started
        release.signal()
        #expect(error?.kind == .poolTimeout)
        #expect(waited >= .milliseconds(150))
        #expect(waited < .seconds(5))
    }

    /// The committers' connections are held back (`reservedConnections`): shared borrowers (probes,
    /// reports, feeds) that hold every other connection make a further shared borrower wait out its
    /// bound, while a reserved borrower still gets one; a reserved borrower may also use the others.
    @Test func sharedBorrowersCannotTakeTheReservedConnections() throws {
        let db = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: db.connectionString, size: 2, acquireTimeout: .milliseconds(300),
                                                     reservedConnections: 1))
        defer { pool.shutdown() }
        #expect(pool.configuration.reservedConnections == 1)
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        Thread {
            try? pool.withConnection { _ in
                holding.signal()
                _ = release.wait(timeout: .now() + 30)
            }
        }.start()
        try #require(holding.wait(timeout: .now() + 30) == .success, "the shared borrower never got its connection")
        let refused = #expect(throws: PostgresError.self) { try pool.withConnection { _ in } }
        #expect(refused?.kind == .poolTimeout)
        let reserved = try pool.withConnection(for: .reserved) { try $0.query("SELECT 7").first?.decode(Int.self, at: 0) }
        #expect(reserved == 7)
        release.signal()
        // The shared connection is free again: a shared borrower gets it, and two reserved borrowers
        // at once get both connections.
        #expect(try pool.withConnection { try $0.query("SELECT 1").first?.decode(Int.self, at: 0) } == 1)
        let both = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            if (try? pool.withConnection(for: .reserved) { try $0.query("SELECT pg_sleep(0.05)") }) != nil { both.add(1, ordering: .relaxed) }
        }
        #expect(both.load(ordering: .relaxed) == 2)
        // At most size - 1 connections can be reserved: shared borrowers always keep one.
        let clamped = PostgresPool(configuration: .init(connectionString: db.connectionString, size: 1, reservedConnections: 1))
        #expect(clamped.configuration.reservedConnections == 0)
    }

    @Test func terminatedConnectionIsReplacedWithAtMostOneError() throws {
        let db = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: db.connectionString, size: 1))
        defer { pool.shutdown() }
        let firstPID = try pool.withConnection { Int($0.backendPID) }
        let killer = try db.connect()
        let killed = try #require(try killer.query("SELECT pg_terminate_backend($1)", [firstPID]).first)
        #expect(try killed.decode(Bool.self, at: 0))
        var errors = 0
        var answers = 0
        for _ in 0..<5 {
            do {
                let pid = try pool.withConnection { connection in
                    try connection.query("SELECT pg_backend_pid()").first?.decode(Int.self, at: 0)
                }
                #expect(pid != firstPID)
                answers += 1
            } catch {
                errors += 1
            }
        }
        #expect(errors <= 1)
        #expect(answers >= 4)
        #expect(pool.connectionsOpen == 1)
    }

    @Test func unreachableDatabaseFailsFastAndRecoversNothingHeld() throws {
        let pool = PostgresPool(configuration: .init(connectionString: "postgresql://nobody@127.0.0.1:1/none", size: 2, connectTimeoutSeconds: 1))
        defer { pool.shutdown() }
        for _ in 0..<3 {
            let error = #expect(throws: PostgresError.self) { try pool.withConnection { _ in } }
            #expect(error?.kind == .connectionFailed)
        }
        #expect(pool.connectionsOpen == 0)
        #expect(pool.connectionsInUse == 0)
    }

    @Test func shutdownClosesEverything() throws {
        let db = try TestDatabase.create()
        let pool = PostgresPool(configuration: .init(connectionString: db.connectionString, size: 2))
        let pid = try pool.withConnection { Int($0.backendPID) }
        pool.shutdown()
        #expect(pool.connectionsOpen == 0)
        let error = #expect(throws: PostgresError.self) { try pool.withConnection { _ in } }
        #expect(error?.kind == .poolClosed)
        // The server no longer has the pooled session (it may take a moment to notice the close).
        let observer = try db.connect()
        var gone = false
        for _ in 0..<100 where !gone {
            let count = try observer.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", [pid]).first?.decode(Int.self, at: 0)
            gone = count == 0
            if !gone { try observer.query("SELECT pg_sleep(0.05)") }
        }
        #expect(gone)
    }
}
