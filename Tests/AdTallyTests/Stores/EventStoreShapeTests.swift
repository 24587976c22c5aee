@testable import AdTally
import Postgres
import Testing

/// The pure parts of the store's two forms (no database): how a batch is cut into one call per
/// session on Citus, and which errors are a ledger race to run again.
@Suite(.timeLimit(.minutes(3))) struct SessionRunsTests {
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
}

/// Which errors are a concurrent transaction taking a batch's id (`EventIDLedger.isEventIDTaken`):
/// the store runs the batch again for those only.
@Suite(.timeLimit(.minutes(3))) struct LedgerRaceErrorTests {
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
