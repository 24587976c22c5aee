import Foundation
import Postgres
import TestSupport
import Testing

/// `PostgresHash.text` gives what the server's own `hashtext` gives, for values of every length
/// class of the hash (0 to 11 bytes left after the 12-byte blocks), Unicode of 1 to 4 bytes a
/// character, and values that look empty or odd: the answer that decides which Citus shard AdTally
/// sends a session to.
@Suite(.timeLimit(.minutes(5))) struct PostgresHashTests {
    @Test func matchesTheServersHashtextForThousandsOfValues() throws {
        let connection = try TestDatabase.create().connect()
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Character] = Array("abcXYZ019-_.:/ åäöéß✓漢字🎯\u{301}\t\"'\\{},")
        var values: [String] = ["", " ", "0", "NULL", "{}", "\"\"", "é", "e\u{301}", "🎯",
                                String(repeating: "a", count: 12), String(repeating: "b", count: 13),
                                String(repeating: "漢", count: 200), UUID().uuidString.lowercased()]
        for length in 0...40 {
            for _ in 0..<60 {
                values.append(String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "a" }))
            }
        }
        values.append(contentsOf: (0..<200).map { _ in "s-\(UUID().uuidString)" })
        let rows = try connection.query("SELECT hashtext(v) FROM unnest($1::text[]) WITH ORDINALITY AS u(v, n) ORDER BY n",
                                        [PostgresBinaryArray.text(values)]).rows
        #expect(rows.count == values.count)
        var mismatches: [String] = []
        for (value, row) in zip(values, rows) {
            let server = try row.decode(Int.self, at: 0)
            if Int(PostgresHash.text(value)) != server { mismatches.append("\(value.debugDescription): server \(server), here \(PostgresHash.text(value))") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) of \(values.count) differ, first: \(mismatches.prefix(3))")
        #expect(values.count > 2_000)
    }
}
