@testable import AdTally
import Postgres
import Testing

/// The pure parts of the store's two forms (no database): how a batch is cut into one call per
/// session on Citus, and which errors are a ledger race to run again.
@Suite(.timeLimit(.minutes(1))) struct SessionRunsTests {
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

    /// On a shard's own node (`RowForm.listed`), short runs share `VALUES` lists and a long run is
    /// a call of its own, every row stored once and in key order.
    @Test func listedPiecesGatherShortRunsAndCallForLongOnes() {
        let limit = EventStore.listedRunLimit
        // Runs back to back, of the given lengths.
        func runs(_ lengths: [Int]) -> [Range<Int>] {
            var start = 0
            return lengths.map { length in defer { start += length }; return start..<(start + length) }
        }
        #expect(EventStore.listedPieces([]).isEmpty)
        let mixed = EventStore.listedPieces(runs([1, 2, limit, limit + 1, 3, 1, 50]))
        #expect(mixed.map(\.listed) == [true, false, true, false])
        #expect(mixed.map(\.rows) == [0..<(3 + limit), (3 + limit)..<(4 + 2 * limit), (4 + 2 * limit)..<(8 + 2 * limit),
                                      (8 + 2 * limit)..<(58 + 2 * limit)])
        // Thousands of one-row runs: lists of at most rowsPerList rows, covering every row once, in order.
        let many = EventStore.listedPieces(runs(Array(repeating: 1, count: 2 * EventStore.rowsPerList + 5)))
        #expect(many.allSatisfy { $0.listed && $0.rows.count <= EventStore.rowsPerList })
        #expect(many.map(\.rows.count) == [EventStore.rowsPerList, EventStore.rowsPerList, 5])
        #expect(zip(many, many.dropFirst()).allSatisfy { $0.rows.upperBound == $1.rows.lowerBound })
        // A long run is never cut: one call for all its rows.
        #expect(EventStore.listedPieces(runs([10_000])).map(\.listed) == [false])
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
