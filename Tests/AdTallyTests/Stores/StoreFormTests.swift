@testable import AdTally
import Foundation
import Postgres
import Testing
import TestSupport

/// The two forms of the store's writes (rule 5): two inserts of array parameters (PostgreSQL), or
/// one `adtally_store_events` call per session (migration 0013; Citus).
@Suite(.timeLimit(.minutes(3))) struct StoreFormTests {
    @Test func sessionRunsCutSortedEventsAtEverySessionChange() {
        let stored = { (sessions: [String]) in
            sessions.enumerated().map { index, session in
                StoredEvent(event: StoreFixture.event(.impression, session, "ad-1", id: String(format: "00000000-0000-4000-8000-%012d", index)),
                            outcome: .accepted)
            }
        }
        #expect(EventStore.sessionRuns(stored([])).isEmpty)
        #expect(EventStore.sessionRuns(stored(["a"])) == [0..<1])
        #expect(EventStore.sessionRuns(stored(["a", "a", "b", "c", "c", "c"])) == [0..<2, 2..<3, 3..<6])
        // Every event in exactly one run, each run one session's, neighbours of different sessions.
        let sessions = (0..<200).map { "s\($0 / 7)" }
        let runs = EventStore.sessionRuns(stored(sessions))
        #expect(runs.map(\.count).reduce(0, +) == 200)
        #expect(zip(runs, runs.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound && sessions[$0.lowerBound] != sessions[$1.lowerBound] })
        #expect(runs.allSatisfy { run in run.allSatisfy { sessions[$0] == sessions[run.lowerBound] } })
    }

    /// Both forms store the same rows with the same outcomes, for a batch of several sessions with
    /// every optional column: on PostgreSQL (the function exists there too) and on Citus, where a
    /// batch of two sessions is two delegated calls in one transaction.
    @Test func bothInsertFormsStoreTheSameRows() throws {
        var stored: [[String]] = []
        for storesBySession in [false, true] {
            let f = try StoreFixture()
            try f.feed("s1", "feed-1", [StoreFixture.ad("ad-1", 0), StoreFixture.ad("ad-2", 3)])
            try f.feed("s2", "feed-2", [StoreFixture.ad("ad-1", 1)])
            let store = EventStore(clickRule: f.events.clickRule, storesBySession: storesBySession)
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

/// Which errors are a concurrent transaction taking a batch's id (`EventIDLedger.isEventIDTaken`):
/// the store runs the batch again for those only.
@Suite(.timeLimit(.minutes(1))) struct LedgerRaceErrorTests {
    @Test func theLedgerKeysViolationIsARaceHoweverItArrives() {
        let taken = { (sqlState: String, constraint: String?, message: String) in
            EventIDLedger.isEventIDTaken(PostgresError(kind: .statementFailed, message: message, sqlState: sqlState, constraint: constraint))
        }
        // Plain PostgreSQL: the constraint field names the ledger's key.
        #expect(taken("23505", "event_ids_pkey", "duplicate key value violates unique constraint \"event_ids_pkey\""))
        // Citus, relayed from a worker: internal error, no constraint field, the shard's key in the message.
        #expect(taken("XX000", nil, "duplicate key value violates unique constraint \"event_ids_pkey_102464\""))
        #expect(taken("23505", nil, "duplicate key value violates unique constraint \"event_ids_pkey_102464\""))
        // Citus, raised on the node that holds the shard: the shard's key in the constraint field.
        #expect(taken("23505", "event_ids_pkey_102464", "duplicate key value violates unique constraint \"event_ids_pkey_102464\""))
        // Not the ledger's key, or not a violation: not a race to run again.
        #expect(!taken("23505", "events_pkey", "duplicate key value violates unique constraint \"events_pkey\""))
        #expect(!taken("23505", "event_ids_pkey_x1", "duplicate key value violates unique constraint \"event_ids_pkey_x1\""))
        #expect(!taken("XX000", nil, "duplicate key value violates unique constraint \"events_pkey_102464\""))
        #expect(!taken("XX000", nil, "connection to the remote node event_ids_pkey_102464 failed"))
        #expect(!taken("23503", nil, "insert violates foreign key constraint \"event_ids_pkey_102464\""))
    }
}
