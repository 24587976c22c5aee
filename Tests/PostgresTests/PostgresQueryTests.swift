import Foundation
import Postgres
import TestSupport
import Testing

/// The query type that binds by interpolation: each value becomes the next `$n`, fragments are
/// renumbered where they land, and text enters only as static literal parts, `unsafeSQL:` (static
/// text too), `integerLiteral:` or `identifier:`.
@Suite(.timeLimit(.minutes(3))) struct PostgresQueryTests {
    @Test func valuesBecomeNumberedParametersInOrder() {
        let ad = "ad-42'; DROP TABLE ads; --"
        let query: PostgresQuery = "SELECT * FROM ads WHERE ad_id = \(ad) AND n > \(7) AND m < \(7)"
        #expect(query.sql == "SELECT * FROM ads WHERE ad_id = $1 AND n > $2 AND m < $3")
        #expect(query.binds.map(\.postgresParameter) == [.text(ad), .text("7"), .text("7")])
    }

    @Test func aFragmentIsRenumberedWhereItLands() {
        let low: PostgresQuery = "x >= \(1) AND x < \(2)"
        let columns: StaticString = "a, b"
        let query: PostgresQuery = "SELECT \(unsafeSQL: columns) FROM t WHERE y = \("z") AND \(low) AND w = \("v") LIMIT \(integerLiteral: 10)"
        #expect(query.sql == "SELECT a, b FROM t WHERE y = $1 AND x >= $2 AND x < $3 AND w = $4 LIMIT 10")
        #expect(query.binds.map(\.postgresParameter) == [.text("z"), .text("1"), .text("2"), .text("v")])
        let joined = [low, "z = \(3)"].joined(separator: " OR ")
        #expect(joined.sql == "x >= $1 AND x < $2 OR z = $3")
        #expect((low + " OR \(true)").sql == "x >= $1 AND x < $2 OR $3")
    }

    @Test func identifiersAreQuotedWithTheirQuotesDoubled() {
        let query: PostgresQuery = "DROP TABLE \(identifier: "events_p20261201") , \(identifier: #"a"b"#)"
        #expect(query.sql == #"DROP TABLE "events_p20261201" , "a""b""#)
        #expect(query.binds.isEmpty)
    }

    @Test func aNilValueIsANullParameter() throws {
        let connection = try TestDatabase.create().connect()
        let missing: String? = nil
        let query: PostgresQuery = "SELECT \(missing)::text IS NULL, \("x")::text"
        let row = try #require(try connection.query(query).first)
        #expect(try row.decode(Bool.self, at: 0))
        #expect(try row.decode(String.self, at: 1) == "x")
    }
}

/// `withTransaction`: BEGIN with the first statements, COMMIT with the last pipeline or after the
/// body, rollback on every failure, and the retry policy in one place.
@Suite(.timeLimit(.minutes(3))) struct TransactionHelperTests {
    @Test func aPipelineCommitsWithItsLastRoundTrip() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE t (v int)")
        let sum = try connection.withTransaction { transaction -> Int in
            var pipeline = PostgresPipeline()
            pipeline.add("INSERT INTO t VALUES (\(1)), (\(2))")
            let total = pipeline.add("SELECT sum(v)::int FROM t") { try $0.first?.decode(Int.self, at: 0) ?? -1 }
            return try transaction.run(pipeline, commit: true)[total]
        }
        #expect(sum == 3)
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT count(*) FROM t").first?.decode(Int64.self, at: 0) == 2)
    }

    @Test func aTransientFailureRunsTheWholeTransactionAgain() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try connection.execute("CREATE TABLE t (v int)")
        var runs = 0
        try connection.withTransaction(retry: .transientFailures(attempts: 3)) { transaction in
            runs += 1
            try transaction.query("INSERT INTO t VALUES (\(runs))")
            if runs < 3 { throw PostgresError(kind: .statementFailed, message: "lost", sqlState: SQLState.serializationFailure) }
        }
        #expect(runs == 3)
        // Only the last run's row stayed: the others were rolled back.
        #expect(try connection.query("SELECT array_agg(v)::text FROM t").first?.decode(String.self, at: 0) == "{3}")
    }

    @Test func anErrorThePolicyRefusesIsThrownAtOnceAfterTheRollback() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE t (v int)")
        struct Refused: Error {}
        var runs = 0
        #expect(throws: Refused.self) {
            try connection.withTransaction(retry: .transientFailures(attempts: 5)) { transaction in
                runs += 1
                try transaction.query("INSERT INTO t VALUES (1)")
                throw Refused()
            }
        }
        #expect(runs == 1)
        #expect(!connection.isInTransaction)
        #expect(try connection.query("SELECT count(*) FROM t").first?.decode(Int64.self, at: 0) == 0)
    }

    @Test func whatCommittedIsNeverRunAgain() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE t (v int)")
        var runs = 0
        #expect(throws: PostgresError.self) {
            try connection.withTransaction(retry: .transientFailures(attempts: 5)) { transaction in
                runs += 1
                var pipeline = PostgresPipeline()
                pipeline.add("INSERT INTO t VALUES (1)")
                _ = try transaction.run(pipeline, commit: true)
                throw PostgresError(kind: .statementFailed, message: "after the commit", sqlState: SQLState.serializationFailure)
            }
        }
        #expect(runs == 1)
        #expect(try connection.query("SELECT count(*) FROM t").first?.decode(Int64.self, at: 0) == 1)
    }

    @Test func aBodyThatSendsNothingBeginsNothing() throws {
        let connection = try TestDatabase.create().connect()
        let value = try connection.withTransaction { _ in 7 }
        #expect(value == 7)
        #expect(!connection.isInTransaction)
    }

    @Test func aReadOnlyTransactionRefusesWrites() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE t (v int)")
        let error = #expect(throws: PostgresError.self) {
            try connection.withTransaction(.readOnly) { transaction in
                try transaction.query("INSERT INTO t VALUES (1)")
            }
        }
        #expect(error?.sqlState == "25006")
        // (A connection that met 25006 is not lent again: the pool takes it for a standby.)
        #expect(!connection.isUsable)
    }
}
