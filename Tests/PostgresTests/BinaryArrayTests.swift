import Foundation
import Postgres
import TestSupport
import Testing

/// Arrays in binary format reach the server as the same values their text form gives: every
/// check compares with what PostgreSQL itself makes of the text form, or reads the values back.
@Suite(.timeLimit(.minutes(5))) struct BinaryArrayTests {
    @Test func textMatchesTheTextForm() throws {
        let connection = try TestDatabase.create().connect()
        let values: [String?] = ["plain", "a,b", "{braces}", "quote\"d", "back\\slash", "NULL", nil, "", "åäö ✓ 漢字 🎯", "'; DROP TABLE x; --"]
        let row = try #require(try connection.query(
            "SELECT $1::text[] IS NOT DISTINCT FROM $2::text[], cardinality($1::text[])",
            [PostgresBinaryArray.text(values), PostgresArray(values)]).first)
        #expect(try row.decode(Bool.self, at: 0))
        #expect(try row.decode(Int.self, at: 1) == values.count)
        let back = try connection.query("SELECT v FROM unnest($1::text[]) WITH ORDINALITY AS u(v, n) ORDER BY n",
                                        [PostgresBinaryArray.text(values)]).rows
        #expect(try back.map { try $0.decode(String?.self, at: 0) } == values)
    }

    @Test func integersFloatsAndBoolsMatchTheTextForm() throws {
        let connection = try TestDatabase.create().connect()
        let int4: [Int32?] = [0, 1, -1, .max, .min, nil, 42]
        let int8: [Int64?] = [0, -1, .max, .min, nil, 1_795_960_020_000_000]
        let float8: [Double?] = [0, -0.0, 0.1, -2.5e300, .leastNonzeroMagnitude, .infinity, -.infinity, .nan, nil]
        let bool: [Bool?] = [true, false, nil]
        let row = try #require(try connection.query("""
            SELECT $1::int4[] IS NOT DISTINCT FROM $2::int4[], $3::int8[] IS NOT DISTINCT FROM $4::int8[],
                   $5::float8[] IS NOT DISTINCT FROM $6::float8[], $7::bool[] IS NOT DISTINCT FROM $8::bool[]
            """, [
                PostgresBinaryArray.int4(int4), PostgresArray(int4), PostgresBinaryArray.int8(int8), PostgresArray(int8),
                PostgresBinaryArray.float8(float8), PostgresArray(float8), PostgresBinaryArray.bool(bool), PostgresArray(bool),
            ]).first)
        for column in 0..<4 {
            #expect(try row.decode(Bool.self, at: column), "column \(column)")
        }
    }

    @Test func timestampsAreMicrosecondsSinceTheUnixEpoch() throws {
        let connection = try TestDatabase.create().connect()
        // The Unix epoch, PostgreSQL's own epoch, a microsecond before 1970, and a time in 2026.
        let values: [Int64?] = [0, 946_684_800_000_000, -1, 1_795_960_020_123_456, nil]
        let rows = try connection.query("""
            SELECT (extract(epoch FROM t) * 1000000)::bigint FROM unnest($1::timestamptz[]) WITH ORDINALITY AS u(t, n) ORDER BY n
            """, [PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: values)]).rows
        #expect(try rows.map { try $0.decode(Int64?.self, at: 0) } == values)
        let same = try #require(try connection.query("SELECT $1::timestamptz[] IS NOT DISTINCT FROM $2::timestamptz[]", [
            PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: values),
            PostgresArray(values.map { $0.map(PostgresTimestamp.format(microseconds:)) }),
        ]).first)
        #expect(try same.decode(Bool.self, at: 0))
    }

    @Test func uuidsInAnyCaseAndTheirRefusals() throws {
        let connection = try TestDatabase.create().connect()
        let values = ["6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6BA7B811-9DAD-11D1-80B4-00C04FD430C8", "00000000-0000-0000-0000-000000000000",
                      "ffffffff-ffff-ffff-ffff-ffffffffffff"]
        let array = try #require(PostgresBinaryArray.uuid(values))
        let rows = try connection.query("SELECT u::text FROM unnest($1::uuid[]) WITH ORDINALITY AS x(u, n) ORDER BY n", [array]).rows
        #expect(try rows.map { try $0.decode(String.self, at: 0) } == values.map { $0.lowercased() })
        for bad in ["6ba7b810-9dad-11d1-80b4-00c04fd430c", "6ba7b810-9dad-11d1-80b4-00c04fd430c8a", "6ba7b810-9dad-11d1-80b4-00c04fd430cg", ""] {
            #expect(PostgresBinaryArray.uuid([values[0], bad]) == nil, "\(bad)")
        }
    }

    @Test func emptyArrays() throws {
        let connection = try TestDatabase.create().connect()
        let noUUIDs = try #require(PostgresBinaryArray.uuid([]))
        let row = try #require(try connection.query(
            "SELECT cardinality($1::text[]), cardinality($2::uuid[]), $3::int4[] = '{}'::int4[]",
            [PostgresBinaryArray.text([String]()), noUUIDs, PostgresBinaryArray.int4([])]).first)
        #expect(try row.decode(Int.self, at: 0) == 0)
        #expect(try row.decode(Int.self, at: 1) == 0)
        #expect(try row.decode(Bool.self, at: 2))
    }

    @Test func wrongElementTypeIsAStatementErrorAndTheConnectionLives() throws {
        let connection = try TestDatabase.create().connect()
        let error = #expect(throws: PostgresError.self) {
            try connection.query("SELECT cardinality($1::int4[])", [PostgresBinaryArray.int8([1, 2])])
        }
        #expect(error?.kind == .statementFailed)
        #expect(try connection.query("SELECT 1").first?.decode(Int.self, at: 0) == 1)
    }

    @Test func aNulInTextIsRefusedNotCutOff() throws {
        let connection = try TestDatabase.create().connect()
        let error = #expect(throws: PostgresError.self) {
            try connection.query("SELECT $1::text[]", [PostgresBinaryArray.text(["before\u{0}after"])])
        }
        #expect(error?.kind == .statementFailed)
    }
}
