import Foundation
import Postgres
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct ErrorAndTransactionTests {
    @Test func uniqueViolationCarriesSQLStateAndConstraint() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE things (id int CONSTRAINT things_pk PRIMARY KEY)")
        try connection.query("INSERT INTO things VALUES ($1)", [1])
        let error = #expect(throws: PostgresError.self) { try connection.query("INSERT INTO things VALUES ($1)", [1]) }
        #expect(error?.sqlState == "23505")
        #expect(error?.isUniqueViolation == true)
        #expect(error?.constraint == "things_pk")
        #expect(error?.kind == .statementFailed)
        #expect(error?.isConnectionGone == false)
        // The connection is still usable after a failed statement.
        #expect(try connection.query("SELECT count(*) FROM things").first?.decode(Int64.self, at: 0) == 1)
    }

    @Test func syntaxErrorIsAStatementFailure() throws {
        let connection = try TestDatabase.create().connect()
        let error = #expect(throws: PostgresError.self) { try connection.query("SELEC 1") }
        #expect(error?.sqlState == "42601")
        #expect(error?.isConnectionGone == false)
    }

    @Test func thrownErrorRollsBack() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE t (v int)")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try connection.withTransaction { connection in
                try connection.query("INSERT INTO t VALUES ($1)", [1])
                throw Boom()
            }
        }
        #expect(try connection.query("SELECT count(*) FROM t").first?.decode(Int64.self, at: 0) == 0)
        _ = try connection.withTransaction { connection in
            try connection.query("INSERT INTO t VALUES ($1)", [2])
        }
        #expect(try connection.query("SELECT count(*) FROM t").first?.decode(Int64.self, at: 0) == 1)
        #expect(connection.isUsable)
    }

    @Test func failedStatementRollsBackTheWholeTransaction() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE t (v int PRIMARY KEY)")
        #expect(throws: PostgresError.self) {
            try connection.withTransaction { connection in
                try connection.query("INSERT INTO t VALUES ($1)", [1])
                try connection.query("INSERT INTO t VALUES ($1)", [1])
            }
        }
        #expect(try connection.query("SELECT count(*) FROM t").first?.decode(Int64.self, at: 0) == 0)
    }

    @Test func unreachableServerIsConnectionFailed() throws {
        // Port 1 on loopback: nothing listens there, so the connection is refused at once.
        let error = #expect(throws: PostgresError.self) {
            try PostgresConnection(connectionString: "postgresql://nobody@127.0.0.1:1/none", connectTimeoutSeconds: 2)
        }
        #expect(error?.kind == .connectionFailed)
        #expect(error?.isConnectionGone == true)
    }

    @Test func terminatedBackendIsConnectionLost() throws {
        let db = try TestDatabase.create()
        let victim = try db.connect()
        let killer = try db.connect()
        try killer.query("SELECT pg_terminate_backend($1)", [Int(victim.backendPID)])
        let error = #expect(throws: PostgresError.self) { try victim.query("SELECT 1") }
        #expect(error?.kind == .connectionLost)
        #expect(error?.isConnectionGone == true)
        #expect(!victim.isUsable)
    }
}
