@testable import AdTally
import Dispatch
import Foundation
import HTTPServer
import Postgres
import Runtime
import Synchronization
import TestSupport
import Testing

/// Reads on a real hot standby (`ReadDatabase`): a query the standby cancels because replaying the
/// primary's changes needs what it holds (a recovery conflict) is run once more, then `503`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct StandbyReadTests {
    @Test func aReadCancelledByRecoveryIsRunOnceMoreThenAnswered503() throws {
        let primary = try DisposableCluster()
        // Conflicting queries are cancelled at once instead of delaying replay (the default 30 s).
        let standby = try primary.makeStandby(settings: ["max_standby_streaming_delay = 0"])
        let writer = try PostgresConnection(connectionString: primary.connectionString)
        try writer.execute("CREATE TABLE conflict_t (x int); INSERT INTO conflict_t VALUES (1)")
        try primary.waitUntilReplayed(by: standby)
        let pool = PostgresPool(configuration: .init(connectionString: standby.connectionString, size: 2))
        defer { pool.shutdown() }
        let logged = Mutex<[String]>([])
        let reads = ReadDatabase(pool: pool, isStandby: true, answerTimeout: .seconds(120), logger: Logger(level: .info) { line in logged.withLock { $0.append(line) } })

        /// Takes an ACCESS EXCLUSIVE lock on the primary a moment from now: its replay conflicts
        /// with a standby query that reads the table.
        func lockOnThePrimarySoon() {
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(300)) {
                _ = try? writer.execute("BEGIN; LOCK TABLE conflict_t IN ACCESS EXCLUSIVE MODE; COMMIT")
            }
        }

        let attempts = Atomic<Int>(0)
        let started = ContinuousClock.now
        let count = try reads.read { connection -> Int in
            if attempts.add(1, ordering: .relaxed).newValue == 1 {
                lockOnThePrimarySoon()
                _ = try connection.query("SELECT pg_sleep(5) FROM conflict_t")
            }
            return try connection.query("SELECT count(*) FROM conflict_t").first?.decode(Int.self, at: 0) ?? -1
        }
        #expect(count == 1)
        #expect(attempts.load(ordering: .relaxed) == 2)
        #expect(ContinuousClock.now - started < .seconds(4), "the first attempt was not cancelled: \(ContinuousClock.now - started)")

        // Every attempt cancelled: two attempts, then the conflict, which the API answers 503 with Retry-After.
        attempts.store(0, ordering: .relaxed)
        let refused = #expect(throws: PostgresError.self) {
            try reads.read { connection in
                attempts.add(1, ordering: .relaxed)
                lockOnThePrimarySoon()
                _ = try connection.query("SELECT pg_sleep(5) FROM conflict_t")
            }
        }
        let answer = refused.map { ErrorBody.api.answer($0).response }
        #expect(answer?.status.code == 503)
        #expect(answer?.errorCode == "unavailable")
        #expect(answer?.headers["Retry-After"] == "1")
        #expect(attempts.load(ordering: .relaxed) == 2)
        // A conflict is not an outage: the database stays reachable, and nothing is logged as one.
        #expect(reads.state.reachable)
        #expect(!logged.withLock { $0 }.contains { $0.contains("unreachable") })
    }

    /// A standby may end the session of a query it conflicts with (FATAL, the connection closed):
    /// libpq then reports a lost connection that carries the conflict's SQLSTATE. Run once more,
    /// then `503`, and the standby is not marked unreachable; a connection lost with no SQLSTATE is.
    @Test func aSessionEndedByARecoveryConflictIsNotAnOutage() throws {
        let cluster = try DisposableCluster()
        let pool = PostgresPool(configuration: .init(connectionString: cluster.connectionString, size: 2))
        defer { pool.shutdown() }
        let logged = Mutex<[String]>([])
        let reads = ReadDatabase(pool: pool, isStandby: true, answerTimeout: .seconds(60), logger: Logger(level: .info) { line in logged.withLock { $0.append(line) } })

        let attempts = Atomic<Int>(0)
        let refused = #expect(throws: PostgresError.self) {
            try reads.read { connection in
                attempts.add(1, ordering: .relaxed)
                _ = try connection.query("SELECT 1")
                throw PostgresError(kind: .connectionLost, message: "terminating connection due to conflict with recovery",
                                    sqlState: SQLState.serializationFailure)
            }
        }
        #expect(refused.map { ErrorBody.api.answer($0).response.status.code } == 503)
        #expect(attempts.load(ordering: .relaxed) == 2)
        #expect(reads.state.reachable)
        #expect(!logged.withLock { $0 }.contains { $0.contains("unreachable") })

        // The same failure without the conflict's SQLSTATE is a database gone.
        attempts.store(0, ordering: .relaxed)
        #expect(throws: PostgresError.self) {
            try reads.read { _ in
                attempts.add(1, ordering: .relaxed)
                throw PostgresError(kind: .connectionLost, message: "server closed the connection unexpectedly")
            }
        }
        #expect(attempts.load(ordering: .relaxed) == 2)
        #expect(!reads.state.reachable)
    }
}
