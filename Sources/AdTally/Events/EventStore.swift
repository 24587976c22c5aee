import Contract
import Postgres
import Timestamps

/// Decides and stores a batch of well-formed events (rules 2 to 5 of the events contract) in one
/// transaction. This is the orchestration only; the rules live in their own files (`IdempotencyRule`,
/// `ImpressionRule`, `ClickRule`), the statements that read and claim what they judge in
/// `CountingState` and `EventIDLedger`, and the bookkeeping over a batch in `EventBatch`,
/// `BatchReads` and `BatchJudge`. Read `decideAndStore` top to bottom for the order of the rules.
///
/// The transaction takes three round trips whatever the batch size, each a pipeline of set-based
/// statements: read (with the locks the verdicts need), claim, store and commit.
public struct EventStore: Sendable {
    /// Rule 4's settings.
    public let clickRule: ClickRule
    /// Where the transactions run and how their statements name their sessions.
    public let topology: EventTopology

    public init(clickRule: ClickRule, topology: EventTopology = .plain) {
        self.clickRule = clickRule
        self.topology = topology
    }

    /// The instant a batch's events are stamped with (`received_at`, which reports count by).
    public enum ReceivedAt: Sendable, Equatable {
        /// The database's clock, read inside the transaction after it joined the watermark
        /// (`adtally_begin_batch`): one clock for every process on every host, and the one that
        /// makes `final_before` provable. What the service uses.
        case databaseClock
        /// A known instant, for tests that need events at a given time.
        case fixed(Timestamp)

        /// The fixed instant, nil for the database's clock.
        var fixedInstant: Timestamp? {
            if case .fixed(let instant) = self { return instant }
            return nil
        }
    }

    /// When a batch's transaction runs again: a concurrent transaction got in its way (a deadlock
    /// or serialization failure, a plan a migration made stale, an event id another process
    /// recorded meanwhile), or its day's partition did not exist yet (made before the next run).
    /// Everything of the failed run was rolled back.
    static let retry = RetryPolicy.transientFailures(attempts: 5).or { mayRunAgain($0) || EventPartitions.isMissingPartition($0) }

    /// Decides and stores `events` (in order) in a transaction of its own on `connection`, and
    /// returns one outcome each once it committed. Every event of the batch is received at the
    /// same instant (`receivedAt`). A transaction that `retry` accepts runs again, up to five times;
    /// anything else is thrown, after the rollback: nothing of the batch is stored then, unless
    /// the connection was lost during `COMMIT`, whose outcome is unknown (a retry is answered from
    /// the ledger if it committed).
    ///
    /// `onShardNode`: the transaction runs on the Citus node that holds the shard of every one of
    /// its sessions (routed group commit, `ShardRouter`), where the rows are stored by a statement
    /// for the transaction (`RowForm.onShardNode`) rather than by a call per session.
    public func ingest(_ events: [EventInput], receivedAt: ReceivedAt = .databaseClock, on connection: PostgresConnection,
                       onShardNode: Bool = false) throws -> [EventOutcome] {
        guard !events.isEmpty else { return [] }
        let batch = EventBatch(events)
        let form = topology.rowForm(onShardNode: onShardNode)
        return try connection.withTransaction(retry: Self.retry, beforeRetry: { error in
            // Maintenance makes partitions a week ahead; should it never have run, the batch
            // makes the one it needs rather than fail.
            if EventPartitions.isMissingPartition(error) { try EventPartitions.ensure(around: receivedAt.fixedInstant, on: connection) }
        }) { transaction in
            try decideAndStore(batch, receivedAt: receivedAt, form: form, in: transaction)
        }
    }

    /// How rule 5's rows (the audit rows and the ledger rows) are sent.
    enum RowForm {
        /// Two inserts of array parameters (`unnest`, one bind a column): the cheapest on
        /// PostgreSQL, where group commit joins hundreds of events of many sessions in one
        /// transaction.
        case arrays
        /// On Citus through any node: one `adtally_store_events` call per session (migration
        /// 0013), which Citus delegates to the session's shard, where both inserts run locally.
        case callPerSession
        /// On Citus, on the node of the shard that holds every session of the transaction (routed
        /// group commit): up to `listedLimit` events as two multi-row `VALUES` inserts, which
        /// Citus plans as router inserts into that one shard and runs locally; more as the array
        /// inserts, whatever their sessions. Either way a statement for the transaction, never a
        /// call per session: on the shard's own node the call's inserts (and the array inserts)
        /// read a non-distributed source, which Citus runs by pulling the rows and copying them
        /// into the shard, at a fixed cost per statement (its copy's setup reads the placement
        /// of every shard of the table) that was half of a worker's time for single events, a
        /// third for batches (docs/SCALING.md).
        case onShardNode
    }

    /// `ingest` inside the transaction the caller has open, which it neither commits nor retries:
    /// for tests that hold the transaction open to see what it locks.
    func ingest(_ events: [EventInput], receivedAt: ReceivedAt, inOpenTransactionOn connection: PostgresConnection) throws -> [EventOutcome] {
        guard !events.isEmpty else { return [] }
        return try decideAndStore(EventBatch(events), receivedAt: receivedAt, form: topology.rowForm(onShardNode: false),
                                  in: .joining(connection))
    }

    /// Whether `error` means a concurrent transaction got in the way, so that running the batch
    /// again (on a clean state: it was rolled back) is right.
    static func mayRunAgain(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        return error.isTransientTransactionFailure || EventIDLedger.isEventIDTaken(error)
    }

    private func decideAndStore(_ batch: EventBatch, receivedAt stamp: ReceivedAt, form: RowForm,
                                in transaction: PostgresTransaction) throws -> [EventOutcome] {
        let events = batch.events
        var outcomes = BatchOutcomes(count: events.count)

        // Read, in one round trip: the batch's received_at, under the watermark lock; the ledger
        // entries of its ids (rule 2); the sessions that have clicks, locked (rule 4 decides a
        // session's clicks one transaction at a time), and those not yet marked active today;
        // then, under those locks, every pair's row.
        var opening = PostgresPipeline()
        let received = opening.add(Self.beginBatch(stamp)) { result in
            // adtally_begin_batch returns a value for every call.
            guard let row = result.first else { throw PostgresError(kind: .statementFailed, message: "adtally_begin_batch returned no instant") }
            return try row.decode(Timestamp.self, at: 0)
        }
        let reads = BatchReads(batch, topology: topology, adding: &opening)
        let results = try transaction.run(opening)
        let receivedAt = try results[received]
        var facts = try reads.facts(from: results)
        // Erased sessions (API 1.4): only a session without any pair row can be one.
        let unserved = reads.sessionsWithoutPairRows(facts)
        if !unserved.isEmpty { try facts.readErased(unserved, in: transaction) }
        // The earlier snapshots that clicks name, for the grace window: only when a click names
        // one that is not its session's current snapshot (read under the session's lock, so the
        // current one cannot have changed since), which is the rare case of a tap that raced a refresh.
        let named = reads.earlierSnapshotsNamed(current: facts.sessions)
        if !named.snapshots.isEmpty { try facts.readHistory(named, topology: topology, in: transaction) }

        // Rule 2: a taken id is a replay (its original outcome) or a conflict; either way nothing new is stored.
        var fresh: [Int] = []
        fresh.reserveCapacity(batch.primaries.count)
        for index in batch.primaries {
            if !facts.erased.isEmpty, facts.erased.contains(events[index].sessionID) {
                // An erased session (API 1.4): refused before any rule, stored nowhere.
                outcomes[index] = .rejected(.sessionErased)
            } else if let entry = facts.ledger[EventKey(events[index])] {
                outcomes[index] = IdempotencyRule.answer(events[index], entry)
            } else {
                fresh.append(index)
            }
        }

        // Rules 3 and 4, event by event in request order, on what was read and what this batch
        // decided before (an earlier accepted click, a candidate impression).
        var judge = BatchJudge(clickRule: clickRule, batch: batch, facts: facts, receivedAt: receivedAt)
        for index in fresh {
            outcomes[index] = judge.decide(index)
        }

        // The first impression of each pair counts only if it is still the first under the row
        // lock; accepted clicks are recorded on their pairs in the same update, in key order.
        for (index, outcome) in try claim(judge, batch: batch, receivedAt: receivedAt, in: transaction) {
            outcomes[index] = outcome
        }

        // Rule 5: store every fresh event with its outcome, the sessions' last accepted clicks, and
        // the ledger; then commit, in the same round trip.
        // Sorted as indices, then copied once: sorting the events themselves moved (and retained
        // and released) every string of each event at every step.
        let decided = outcomes.decided(fresh)
        let order = events.withUnsafeBufferPointer { all in
            fresh.indices.sorted { StoredEvent.keyOrder(all, fresh[$0], fresh[$1]) }
        }
        let stored = order.map { StoredEvent(event: events[fresh[$0]], outcome: decided[$0]) }
        var writes = PostgresPipeline()
        let sessionClicks = judge.sessionClicks()
        if !sessionClicks.isEmpty { writes.add(CountingState.recordLastClicks(sessionClicks, topology: topology)) }
        switch form {
        case .callPerSession:
            for run in Self.sessionRuns(stored) {
                writes.add(Self.storeSession(stored[run], receivedAt: receivedAt))
            }
        case .onShardNode where stored.count <= Self.listedLimit:
            if !stored.isEmpty {
                writes.add(Self.listEvents(stored[...], receivedAt: receivedAt))
                writes.add(EventIDLedger.list(stored[...], receivedAt: receivedAt))
            }
        case .arrays where !stored.isEmpty, .onShardNode where !stored.isEmpty:
            let columns = IdentityColumns(stored)
            writes.add(Self.insertEvents(stored, columns: columns, receivedAt: receivedAt))
            writes.add(EventIDLedger.record(stored, columns: columns, receivedAt: receivedAt))
        case .arrays, .onShardNode:
            break
        }
        _ = try transaction.run(writes, commit: true)

        // Repeats of an id inside the batch. The stored event owns the id: when the id was taken
        // before this batch, a repeat is judged against that event (rule 2), whatever the batch's
        // first occurrence was; only an id this batch stored itself makes its first occurrence the
        // one that decides (the same type and ad: its outcome; else a conflict).
        for (index, first) in batch.repeats {
            let event = events[index], original = events[first]
            if !facts.erased.isEmpty, facts.erased.contains(event.sessionID) {
                outcomes[index] = .rejected(.sessionErased)
            } else if let entry = facts.ledger[EventKey(event)] {
                outcomes[index] = IdempotencyRule.answer(event, entry)
            } else if original.type == event.type, original.adID == event.adID {
                outcomes[index] = outcomes[first]
            } else {
                outcomes[index] = .rejected(.eventIDConflict)
            }
        }
        return outcomes.complete()
    }

    /// Claims the pairs the judge asks for and settles the impressions left to their claims: the
    /// candidate that won is accepted; one that lost met a concurrent claim (a duplicate), or its
    /// pair's row went away with a forgotten session (not served), which the row as committed now
    /// tells.
    private func claim(_ judge: BatchJudge, batch: EventBatch, receivedAt: Timestamp,
                       in transaction: PostgresTransaction) throws -> [(index: Int, outcome: EventOutcome)] {
        let claims = judge.claims()
        guard !claims.isEmpty else { return [] }
        var claiming = PostgresPipeline()
        let claimed = claiming.add(CountingState.claim(claims, receivedAt: receivedAt, topology: topology)) { try $0.rows.map(CountingState.ClaimRow.init) }
        var won: Set<Int> = []
        for row in try transaction.run(claiming)[claimed] where row.impressionWon && claims.indices.contains(row.index) {
            won.insert(claims[row.index].pairIndex)
        }
        let lost = judge.impressionCandidatePairs.filter { !won.contains($0) }
        var stillServed: Set<Int> = []
        if !lost.isEmpty {
            var again = PostgresPipeline()
            let rows = again.add(CountingState.readPairs(lost.map { batch.pairs[$0] }, topology: topology)) { try $0.rows.map(CountingState.PairRow.init) }
            for row in try transaction.run(again)[rows] where lost.indices.contains(row.index) {
                stillServed.insert(lost[row.index])
            }
        }
        return judge.settleImpressions(won: won, stillServed: stillServed)
    }

    /// Joins the watermark and reads the batch's received_at (migration 0005).
    private static func beginBatch(_ stamp: ReceivedAt) -> PostgresQuery {
        "SELECT adtally_begin_batch(\(stamp.fixedInstant))"
    }

    /// Rule 5: the audit rows as array parameters (PostgreSQL), in the ledger's key order.
    private static func insertEvents(_ events: [StoredEvent], columns: IdentityColumns, receivedAt: Timestamp) -> PostgresQuery {
        let audit = AuditColumns(events)
        return """
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                                snapshot_id, position, visible_fraction, visible_ms)
            SELECT s, e, t, a, st, r, o, \(receivedAt), sn, p, f, ms
            FROM unnest(\(columns.sessionIDs)::text[], \(columns.eventIDs)::uuid[], \(columns.types)::text[], \(columns.adIDs)::text[],
                        \(audit.statuses)::text[], \(audit.reasons)::text[], \(audit.occurredAt)::timestamptz[], \(audit.snapshots)::text[],
                        \(audit.positions)::int[], \(audit.fractions)::float8[], \(audit.milliseconds)::int[])
                 AS u(s, e, t, a, st, r, o, sn, p, f, ms)
            """
    }

    /// The most events a routed transaction (`RowForm.onShardNode`) stores by `VALUES` lists; more
    /// go by the array inserts. Measured on a Citus worker (docs/SCALING.md): an event costs about
    /// 50 µs in the lists (its audit row and its ledger row, each parsed, analysed, deparsed for the
    /// shard and parsed again), the two array inserts about 700 µs whatever their events (each a
    /// pull-and-copy whose setup reads every shard's placement) and little per event, so the lists
    /// are cheaper up to about 14 events.
    static let listedLimit = 12

    /// Rule 5 on the node of the one shard of the transaction's sessions (`RowForm.onShardNode`): the
    /// audit rows, in the ledger's key order, as one `VALUES` list (sent unnamed: its text grows
    /// with its rows). No casts: PostgreSQL types each parameter by its column.
    static func listEvents(_ events: ArraySlice<StoredEvent>, receivedAt: Timestamp) -> PostgresQuery {
        let rows = events.map { stored -> PostgresQuery in
            let event = stored.event, visibility = event.type == .impression ? event.visibility : nil
            return """
                (\(event.sessionID), \(event.eventID), \(event.type.rawValue), \(event.adID), \(stored.outcome.status.rawValue),
                 \(stored.outcome.reason?.rawValue), \(event.occurredAt), \(receivedAt), \(event.snapshotID),
                 \(event.position), \(visibility?.fraction), \(visibility?.milliseconds))
                """
        }
        let query: PostgresQuery = """
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                                snapshot_id, position, visible_fraction, visible_ms)
            VALUES \(rows.joined(separator: ", "))
            """
        return query.sentUnnamed
    }

    /// The runs of one session in `events` (sorted by session first): the ranges of equal session ids.
    static func sessionRuns(_ events: [StoredEvent]) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        var start = 0
        for index in events.indices.dropFirst() where events[index].event.sessionID != events[start].event.sessionID {
            runs.append(start..<index)
            start = index
        }
        if !events.isEmpty { runs.append(start..<events.count) }
        return runs
    }

    /// Rule 5 on Citus: one session's audit rows and ledger rows, in the ledger's key order, by one
    /// call of `adtally_store_events` (migration 0013), which Citus runs on the session's shard.
    static func storeSession(_ events: ArraySlice<StoredEvent>, receivedAt: Timestamp) -> PostgresQuery {
        // storeSession is called with a non-empty run of sessionRuns.
        let session = events.first?.event.sessionID ?? ""
        let identity = IdentityColumns(events), audit = AuditColumns(events)
        return """
            SELECT adtally_store_events(\(session)::text, \(identity.eventIDs)::uuid[], \(identity.types)::text[], \(identity.adIDs)::text[],
                                        \(audit.statuses)::text[], \(audit.reasons)::text[], \(audit.occurredAt)::timestamptz[],
                                        \(receivedAt)::timestamptz, \(audit.snapshots)::text[], \(audit.positions)::int[],
                                        \(audit.fractions)::float8[], \(audit.milliseconds)::int[])
            """
    }
}

/// The columns of the audit rows besides their identity (`IdentityColumns`), as array parameters in
/// the events' order: the outcome, and what the event said of itself (visibility only for
/// impressions).
private struct AuditColumns {
    let statuses: PostgresBinaryArray
    let reasons: PostgresBinaryArray
    let occurredAt: PostgresBinaryArray
    let snapshots: PostgresBinaryArray
    let positions: PostgresBinaryArray
    let fractions: PostgresBinaryArray
    let milliseconds: PostgresBinaryArray

    init(_ events: some Collection<StoredEvent>) {
        statuses = .text(events.map(\.outcome.status.rawValue))
        reasons = .text(events.map(\.outcome.reason?.rawValue))
        occurredAt = .timestamptz(microsecondsSinceUnixEpoch: events.map(\.event.occurredAt.microsecondsSinceEpoch))
        snapshots = .text(events.map(\.event.snapshotID))
        positions = .int4(events.map(\.event.position))
        fractions = .float8(events.map { $0.event.type == .impression ? $0.event.visibility?.fraction : nil })
        milliseconds = .int4(events.map { $0.event.type == .impression ? $0.event.visibility?.milliseconds : nil })
    }
}
