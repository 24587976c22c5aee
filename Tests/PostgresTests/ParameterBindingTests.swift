import Foundation
import Postgres
import TestSupport
import Testing

/// Values travel as bound parameters and come back unchanged, whatever characters they hold.
@Suite(.timeLimit(.minutes(5))) struct ParameterBindingTests {
    @Test(arguments: [
        "plain",
        "it's a 'quoted' \"string\"",
        "'; DROP TABLE users; --",
        "Robert'); DELETE FROM x; --",
        "$1 $2 \\x00 \\\\ backslashes",
        "unicode: åäö ✓ 漢字 🎯 \u{200B}zero-width",
        "",
        "{\"json\": [1, 2]}",
        "NULL",
    ])
    func stringRoundTrips(_ value: String) throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let row = try #require(try connection.query("SELECT $1::text, length($1::text)", [value]).first)
        #expect(try row.decode(String.self, at: 0) == value)
        #expect(try row.decode(Int.self, at: 1) == value.count)
    }

    /// A query sent unnamed runs with its parameters bound like any other, alone or in a
    /// pipeline, and leaves no prepared statement on the connection; a query of the program's
    /// constant texts is prepared once.
    @Test func anUnnamedQueryBindsItsValuesAndPreparesNothing() throws {
        let connection = try TestDatabase.create().connect()
        let prepared: PostgresQuery = ("SELECT count(*) FROM pg_prepared_statements" as PostgresQuery).sentUnnamed
        func preparedCount() throws -> Int { try connection.query(prepared).first?.decode(Int.self, at: 0) ?? -1 }
        let before = try preparedCount()
        let evil = "x'); DROP TABLE t; --"
        let unnamed: PostgresQuery = ("SELECT \(evil)::text, \(Int64(41)) + 1" as PostgresQuery).sentUnnamed
        let row = try #require(try connection.query(unnamed).first)
        #expect(try row.decode(String.self, at: 0) == evil)
        #expect(try row.decode(Int.self, at: 1) == 42)
        var pipeline = PostgresPipeline()
        let piped = pipeline.add(unnamed) { try $0.first?.decode(String.self, at: 0) }
        #expect(try connection.run(pipeline)[piped] == evil)
        #expect(try preparedCount() == before)
        let named: PostgresQuery = "SELECT \(evil)::text"
        _ = try connection.query(named)
        _ = try connection.query(named)
        #expect(try preparedCount() == before + 1)
    }

    @Test func stringSurvivesStorage() throws {
        let connection = try TestDatabase.create().connect()
        try connection.execute("CREATE TABLE t (v text)")
        let evil = "x'); DROP TABLE t; --"
        try connection.query("INSERT INTO t (v) VALUES ($1)", [evil])
        let rows = try connection.query("SELECT v FROM t").rows
        #expect(rows.count == 1)
        #expect(try rows[0].decode(String.self, at: 0) == evil)
    }

    @Test func integersRoundTrip() throws {
        let connection = try TestDatabase.create().connect()
        for value in [Int64.min, -1, 0, 1, Int64.max] {
            let row = try #require(try connection.query("SELECT $1::bigint, $1::bigint + 0 = $1::bigint", [value]).first)
            #expect(try row.decode(Int64.self, at: 0) == value)
            #expect(try row.decode(Bool.self, at: 1))
        }
        let small = try #require(try connection.query("SELECT $1::int, $2::smallint", [Int32.max, 7]).first)
        #expect(try small.decode(Int64.self, at: 0) == Int64(Int32.max))
        #expect(try small.decode(Int.self, at: 1) == 7)
    }

    @Test func doublesRoundTrip() throws {
        let connection = try TestDatabase.create().connect()
        for value in [0.1, -2.5e-300, 1.7976931348623157e308, 0.5, 1.0 / 3.0] {
            let row = try #require(try connection.query("SELECT $1::float8", [value]).first)
            #expect(try row.decode(Double.self, at: 0) == value)
        }
        let special = try #require(try connection.query("SELECT $1::float8, $2::float8", [Double.infinity, Double.nan]).first)
        #expect(try special.decode(Double.self, at: 0) == .infinity)
        #expect(try special.decode(Double.self, at: 1).isNaN)
    }

    @Test func boolsRoundTrip() throws {
        let connection = try TestDatabase.create().connect()
        let row = try #require(try connection.query("SELECT $1::bool, $2::bool, NOT $1::bool", [true, false]).first)
        #expect(try row.decode(Bool.self, at: 0) == true)
        #expect(try row.decode(Bool.self, at: 1) == false)
        #expect(try row.decode(Bool.self, at: 2) == false)
    }

    @Test func uuidsRoundTrip() throws {
        let connection = try TestDatabase.create().connect()
        let id = UUID()
        let row = try #require(try connection.query("SELECT $1::uuid, $1::uuid::text", [id]).first)
        #expect(try row.decode(UUID.self, at: 0) == id)
        #expect(try row.decode(String.self, at: 1) == id.uuidString.lowercased())
    }

    @Test func datesRoundTripToTheMicrosecond() throws {
        let connection = try TestDatabase.create().connect()
        // 2026-11-29T13:47:00.250001Z, from the epoch arithmetic, not from our formatter.
        let micros: Int64 = 1_795_960_020_250_001
        let date = Date(timeIntervalSince1970: Double(micros) / 1_000_000)
        let row = try #require(try connection.query(
            "SELECT $1::timestamptz, (extract(epoch FROM $1::timestamptz) * 1000000)::bigint, to_char($1::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')",
            [date]).first)
        #expect(try row.decode(Int64.self, at: 1) == micros)
        #expect(try row.decode(String.self, at: 2) == "2026-11-29T13:47:00.250001")
        let back = try row.decode(Date.self, at: 0)
        #expect(PostgresTimestamp.microseconds(of: back) == micros)
    }

    @Test(arguments: ["2026-11-29 19:17:00.5+05:30", "1999-12-31 16:00:00-08", "0200-02-28 00:00:00Z",
                      "2024-02-29 23:59:59.999999Z", "12000-01-01 00:00:00Z"])
    func timestampsParseAsTheServerCountsThem(_ literal: String) throws {
        let connection = try TestDatabase.create().connect()
        let row = try #require(try connection.query(
            "SELECT $1::timestamptz, (extract(epoch FROM $1::timestamptz) * 1000000)::bigint", [literal]).first)
        #expect(PostgresTimestamp.microseconds(of: try row.decode(Date.self, at: 0)) == (try row.decode(Int64.self, at: 1)))
    }

    @Test func nullsBecomeOptionals() throws {
        let connection = try TestDatabase.create().connect()
        let none: String? = nil
        let row = try #require(try connection.query("SELECT $1::text, $2::bigint, $1::text IS NULL", [none, Int64?.none]).first)
        #expect(try row.decode(String?.self, at: 0) == nil)
        #expect(try row.decode(Int64?.self, at: 1) == nil)
        #expect(try row.decode(Bool.self, at: 2))
        #expect(throws: PostgresError.self) { try row.decode(String.self, at: 0) }
    }

    @Test func arraysCarryBatches() throws {
        let connection = try TestDatabase.create().connect()
        let values: [String?] = ["a,b", "{braces}", "quote\"d", "back\\slash", "NULL", nil, ""]
        let rows = try connection.query(
            "SELECT ord, v FROM unnest($1::text[]) WITH ORDINALITY AS u(v, ord) ORDER BY ord", [PostgresArray(values)]).rows
        #expect(rows.count == values.count)
        for (index, row) in rows.enumerated() {
            #expect(try row.decode(String?.self, at: 1) == values[index])
        }
        let numbers = try #require(try connection.query("SELECT sum(x)::bigint FROM unnest($1::bigint[]) x", [PostgresArray([1, 2, 3] as [Int64])]).first)
        #expect(try numbers.decode(Int64.self, at: 0) == 6)
    }

    /// Integers are read from libpq's bytes without a `String`: text that is not an integer in
    /// Int64's range is the same clear mismatch as before, never a wrapped or truncated number.
    @Test(arguments: ["", "-", "1a", "--1", "9223372036854775808", "-9223372036854775809", "99999999999999999999", "1.5"])
    func integerTextOutsideInt64IsAMismatch(_ text: String) throws {
        let bytes = Array(text.utf8)
        let error = bytes.withUnsafeBufferPointer { buffer in
            #expect(throws: PostgresError.self) { try Int64.decode(postgresBytes: buffer, typeOID: PostgresTypeOID.int8, column: "n") }
        }
        #expect(error?.kind == .typeMismatch)
        #expect(Int64(text) == nil, "the text is not an Int64 to Swift either")
    }

    @Test func typeMismatchIsAClearError() throws {
        let connection = try TestDatabase.create().connect()
        let row = try #require(try connection.query("SELECT 'text'::text AS label, 42::int AS answer").first)
        let error = #expect(throws: PostgresError.self) { try row.decode(Int64.self, named: "label") }
        #expect(error?.kind == .typeMismatch)
        #expect(error?.message.contains("label") == true)
        #expect(throws: PostgresError.self) { try row.decode(Date.self, named: "answer") }
        #expect(throws: PostgresError.self) { try row.decode(String.self, named: "missing") }
    }
}
