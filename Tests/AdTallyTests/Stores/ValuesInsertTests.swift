@testable import AdTally
import Foundation
import Postgres
import Testing
import TestSupport

/// The chunks of the store's multi-row inserts: few texts per table, few statements per batch.
@Suite(.timeLimit(.minutes(3))) struct ValuesInsertTests {
    @Test func chunksCoverEveryRowOnceInOrderWithFewStatements() {
        for count in 0...700 {
            let chunks = ValuesInsert.chunks(count)
            #expect(chunks.map(\.count).reduce(0, +) == count)
            #expect(zip(chunks, chunks.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
            #expect(chunks.allSatisfy { ValuesInsert.sizes.contains($0.count) })
            if count > 0 { #expect(chunks.count <= (count - 1) / 128 + 4) }
        }
        #expect(ValuesInsert.chunks(50).map(\.count) == [48, 2])
        #expect(ValuesInsert.chunks(1).map(\.count) == [1])
    }

    @Test func aStatementsTextDependsOnItsRowCountOnly() {
        let build = { (count: Int, value: String) in
            ValuesInsert.statements("INSERT INTO t (a, b)", count: count) { index, sql in
                sql.appendLiteral("(")
                sql.appendInterpolation(value)
                sql.appendLiteral(", ")
                sql.appendInterpolation(index)
                sql.appendLiteral(")")
            }
        }
        let first = build(5, "x"), second = build(5, "y")
        #expect(first.map(\.sql) == second.map(\.sql))
        #expect(first.map(\.sql) == ["INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4), ($5, $6), ($7, $8)", "INSERT INTO t (a, b) VALUES ($1, $2)"])
        #expect(first.map(\.binds.count) == [8, 2])
    }

    /// Both insert forms (multi-row VALUES on Citus, array parameters on PostgreSQL) store the same
    /// rows with the same outcomes, for a batch of several sessions with every optional column.
    @Test func bothInsertFormsStoreTheSameRows() throws {
        var stored: [[String]] = []
        for rowsAsValues in [false, true] {
            let f = try StoreFixture()
            try f.feed("s1", "feed-1", [StoreFixture.ad("ad-1", 0), StoreFixture.ad("ad-2", 3)])
            try f.feed("s2", "feed-2", [StoreFixture.ad("ad-1", 1)])
            let store = EventStore(clickRule: f.events.clickRule, rowsAsValues: rowsAsValues)
            let ids = (0..<130).map { String(format: "00000000-0000-4000-8000-%012d", $0) }
            let batch = ids.enumerated().map { index, id in
                StoreFixture.event(index % 3 == 0 ? .click : .impression, index % 2 == 0 ? "s1" : "s2", index % 5 == 0 ? "ad-9" : "ad-1",
                                   id: id, snapshot: index % 4 == 0 ? "feed-1" : nil, position: index % 4 == 0 ? Int32(index % 2 == 0 ? 0 : 3) : nil,
                                   visibility: index % 7 == 0 ? Visibility(fraction: 0.75, milliseconds: 1_200) : nil)
            }
            _ = try store.ingest(batch, receivedAt: .fixed(f.clock.now()), on: f.connection)
            stored.append(try f.connection.query("""
                SELECT e.session_id || e.event_id::text || e.type || e.ad_id || e.status || coalesce(e.reason, '-')
                       || coalesce(e.snapshot_id, '-') || coalesce(e.position::text, '-') || coalesce(e.visible_fraction::text, '-')
                       || coalesce(e.visible_ms::text, '-') || l.status || coalesce(l.reason, '-') || (l.received_at = e.received_at)::text
                FROM events e JOIN event_ids l USING (session_id, event_id) ORDER BY e.session_id, e.event_id
                """).rows.map { try $0.decode(String.self, at: 0) })
        }
        #expect(stored[0].count == 130)
        #expect(stored[0] == stored[1])
    }
}
