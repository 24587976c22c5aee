import Postgres

/// Decides and stores a batch of well-formed events (rules 2 to 5 of the events contract) in one
/// transaction. This is the orchestration only; the rules live in `EventIDLedger` (rule 2),
/// `ImpressionRule` (rule 3) and `ClickRule` (rule 4), and the statements that read and claim what
/// they judge in `CountingState`. Read `ingest` top to bottom for the order of the rules.
///
/// The transaction takes three round trips whatever the batch size, each a pipeline of set-based
/// statements: read (with the locks the verdicts need), claim, store and commit.
public struct EventStore: Sendable {
    /// Rule 4's settings.
    public let clickRule: ClickRule

    public init(clickRule: ClickRule = ClickRule()) {
        self.clickRule = clickRule
    }

    /// The instant a batch's events are stamped with (`received_at`, which reports count by).
    public enum ReceivedAt: Sendable, Equatable {
        /// The database's clock, read inside the transaction after it joined the watermark
        /// (`adtally_begin_batch`): one clock for every process on every host, and the one that
        /// makes `final_before` provable. What the service uses.
        case databaseClock
        /// A known instant, for tests that need events at a given time.
        case fixed(Timestamp)
    }

    /// Decides and stores `events` (in order) in a transaction of its own on `connection`, and
    /// returns one outcome each once it committed. Every event of the batch is received at the
    /// same instant (`receivedAt`).
    ///
    /// A transaction that a concurrent one got in the way of (a deadlock or serialization failure,
    /// a plan a migration made stale, an event id another process recorded meanwhile) was rolled
    /// back as a whole, and runs again, up to five times. Anything else is thrown, after the
    /// rollback; nothing of the batch is stored then, unless the connection was lost during
    /// `COMMIT`, whose outcome is unknown (a retry is answered from the ledger if it committed).
    public func ingest(_ events: [EventInput], receivedAt: ReceivedAt = .databaseClock, on connection: PostgresConnection) throws -> [EventOutcome] {
        guard !events.isEmpty else { return [] }
        let batch = Batch(events)
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try decideAndStore(batch, receivedAt: receivedAt, ownTransaction: true, on: connection)
            } catch {
                if connection.isInTransaction { _ = try? connection.execute("ROLLBACK") }
                guard attempt < 5 else { throw error }
                if EventPartitions.isMissingPartition(error) {
                    // Maintenance makes partitions a week ahead; should it never have run, the
                    // batch makes the one it needs rather than fail.
                    try EventPartitions.ensure(around: receivedAt.fixedInstant, on: connection)
                } else if !Self.mayRunAgain(error) {
                    throw error
                }
            }
        }
    }

    /// `ingest` inside the transaction the caller has open, which it neither commits nor retries:
    /// for tests that hold the transaction open to see what it locks.
    func ingest(_ events: [EventInput], receivedAt: ReceivedAt, inOpenTransactionOn connection: PostgresConnection) throws -> [EventOutcome] {
        guard !events.isEmpty else { return [] }
        return try decideAndStore(Batch(events), receivedAt: receivedAt, ownTransaction: false, on: connection)
    }

    /// Whether `error` means a concurrent transaction got in the way, so that running the batch
    /// again (on a clean state: it was rolled back) is right.
    static func mayRunAgain(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        return error.isTransientTransactionFailure || EventIDLedger.isEventIDTaken(error)
    }

    private func decideAndStore(_ batch: Batch, receivedAt stamp: ReceivedAt, ownTransaction: Bool,
                                on connection: PostgresConnection) throws -> [EventOutcome] {
        let events = batch.events
        var outcomes = [EventOutcome?](repeating: nil, count: events.count)

        // Read, in one round trip: the batch's received_at, under the watermark lock; the ledger
        // entries of its ids (rule 2); the sessions that have clicks, locked (rule 4 decides a
        // session's clicks one transaction at a time), and those not yet marked active today;
        // then, under those locks, every pair's row and the earlier snapshots that clicks name.
        let reads = Reads(batch, day: stamp.fixedInstant)
        let opening = (ownTransaction ? [PostgresStatement("BEGIN")] : []) + [Self.beginBatch(stamp)]
        let results = try connection.pipeline(opening + reads.statements)
        guard let receivedAt = try results[opening.count - 1].first?.decode(Timestamp.self, at: 0) else {
            // adtally_begin_batch returns a value for every call: it cannot be missing.
            throw PostgresError(kind: .statementFailed, message: "adtally_begin_batch returned no instant")
        }
        var facts = try reads.facts(from: Array(results.dropFirst(opening.count)))
        // The earlier snapshots that clicks name, for the grace window: only when a click names
        // one that is not its session's current snapshot (read under the session's lock, so the
        // current one cannot have changed since), which is the rare case of a tap that raced a refresh.
        let named = reads.earlierSnapshotsNamed(current: facts.sessions)
        if !named.snapshots.isEmpty {
            let history = try connection.pipeline([CountingState.readEarlierSnapshots(named.snapshots),
                                                   CountingState.readSnapshotAds(named.ads)])
            try facts.addHistory(snapshots: history[0], ads: history[1])
        }

        // Rule 2: a taken id is a replay (its original outcome) or a conflict; either way nothing new is stored.
        var fresh: [Int] = []
        fresh.reserveCapacity(batch.primaries.count)
        for index in batch.primaries {
            if let entry = facts.ledger[events[index].eventID] {
                outcomes[index] = EventIDLedger.answer(events[index], entry)
            } else {
                fresh.append(index)
            }
        }

        // Rules 3 and 4, event by event in request order, on what was read and what this batch
        // decided before (an earlier accepted click, a candidate impression).
        var judge = Judge(clickRule: clickRule, batch: batch, reads: reads, facts: facts, receivedAt: receivedAt)
        for index in fresh {
            outcomes[index] = judge.decide(events[index], index: index)
        }

        // The first impression of each pair counts only if it is still the first under the row
        // lock; accepted clicks are recorded on their pairs in the same update, in key order.
        let claims = judge.claims()
        if !claims.isEmpty {
            let rows = try connection.pipeline([CountingState.claim(claims, receivedAt: receivedAt)])[0].rows.map(CountingState.ClaimRow.init)
            var won = [Bool](repeating: false, count: reads.pairs.count)
            for row in rows where row.impressionWon && claims.indices.contains(row.index) { won[claims[row.index].pairIndex] = true }
            // A candidate that lost met a concurrent claim (a duplicate), or its pair's row went
            // away with a forgotten session (not served): the row as committed now tells which.
            let lost = judge.impressionCandidatePairs.filter { !won[$0] }
            var stillServed = [Bool](repeating: false, count: reads.pairs.count)
            if !lost.isEmpty {
                let again = try connection.pipeline([CountingState.readPairs(lost.map { reads.pairs[$0] })])[0].rows.map(CountingState.PairRow.init)
                for row in again where lost.indices.contains(row.index) { stillServed[lost[row.index]] = true }
            }
            for (index, outcome) in judge.settleImpressions(won: won, stillServed: stillServed) {
                outcomes[index] = outcome
            }
        }

        // Rule 5: store every fresh event with its outcome, the sessions' last accepted clicks, and
        // the ledger; then commit, in the same round trip.
        let stored = fresh.map { outcomes[$0] ?? .rejected(.eventIDConflict) }
        let columns = IdentityColumns(fresh.map { events[$0] })
        var writes: [PostgresStatement] = []
        let lastClicks = judge.lastAcceptedClicks()
        if !lastClicks.isEmpty { writes.append(CountingState.recordLastClicks(lastClicks)) }
        if !fresh.isEmpty {
            writes.append(Self.insertEvents(fresh.map { events[$0] }, outcomes: stored, columns: columns, receivedAt: receivedAt))
            writes.append(EventIDLedger.record(columns, outcomes: stored, receivedAt: receivedAt))
        }
        if ownTransaction { writes.append(PostgresStatement("COMMIT")) }
        _ = try connection.pipeline(writes)

        // Repeats of an id inside the batch answer as their first occurrence did (or conflict).
        for (index, first) in batch.repeats {
            let event = events[index], original = events[first]
            if original.type == event.type, original.sessionID == event.sessionID, original.adID == event.adID,
               outcomes[first] != .rejected(.eventIDConflict) {
                outcomes[index] = outcomes[first]
            } else {
                outcomes[index] = .rejected(.eventIDConflict)
            }
        }
        // Every index has an outcome by construction: each event is a primary (decided above) or a repeat.
        return outcomes.map { $0 ?? .rejected(.eventIDConflict) }
    }

    /// Joins the watermark and reads the batch's received_at (migration 0005).
    private static func beginBatch(_ stamp: ReceivedAt) -> PostgresStatement {
        PostgresStatement("SELECT adtally_begin_batch($1)", [stamp.fixedInstant])
    }

    /// Rule 5: the audit rows. `columns` are the identity columns of exactly `events`, in order.
    private static func insertEvents(_ events: [EventInput], outcomes: [EventOutcome], columns: IdentityColumns,
                                     receivedAt: Timestamp) -> PostgresStatement {
        PostgresStatement("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                                snapshot_id, position, visible_fraction, visible_ms)
            SELECT s, e, t, a, st, r, o, $12, sn, p, vf, vm
            FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                        $8::text[], $9::int[], $10::float8[], $11::int[])
                 AS u(s, e, t, a, st, r, o, sn, p, vf, vm)
            """, [
                columns.sessionIDs, columns.eventIDs, columns.types, columns.adIDs,
                PostgresBinaryArray.text(outcomes.map(\.status.rawValue)), PostgresBinaryArray.text(outcomes.map(\.reason?.rawValue)),
                PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: events.map(\.occurredAt.microsecondsSinceEpoch)),
                PostgresBinaryArray.text(events.map(\.snapshotID)), PostgresBinaryArray.int4(events.map(\.position)),
                PostgresBinaryArray.float8(events.map { $0.type == .impression ? $0.visibility?.fraction : nil }),
                PostgresBinaryArray.int4(events.map { $0.type == .impression ? $0.visibility?.milliseconds : nil }),
                receivedAt,
            ])
    }
}

extension EventStore.ReceivedAt {
    /// The fixed instant, nil for the database's clock.
    var fixedInstant: Timestamp? {
        if case .fixed(let instant) = self { return instant }
        return nil
    }
}

extension EventStore {
    /// A request's events, with an id seen twice settled by its first occurrence.
    struct Batch {
        let events: [EventInput]
        /// The first occurrence of each id, in order.
        let primaries: [Int]
        /// Later occurrences, with the index of the first.
        let repeats: [(index: Int, first: Int)]

        init(_ events: [EventInput]) {
            self.events = events
            var firstIndexOfID: [String: Int] = [:]
            firstIndexOfID.reserveCapacity(events.count)
            var primaries: [Int] = []
            primaries.reserveCapacity(events.count)
            var repeats: [(index: Int, first: Int)] = []
            for (index, event) in events.enumerated() {
                if let first = firstIndexOfID[event.eventID] {
                    repeats.append((index, first))
                } else {
                    firstIndexOfID[event.eventID] = index
                    primaries.append(index)
                }
            }
            self.primaries = primaries
            self.repeats = repeats
        }
    }

    /// The first round trip's statements, and what their results say. Pairs are named by their
    /// index in `pairs` from here on, so that no statement sends or returns their ids twice.
    struct Reads {
        let statements: [PostgresStatement]
        /// The distinct (session, ad) pairs of the batch's primaries.
        let pairs: [SessionAd]
        /// For each event index, the index of its pair in `pairs`.
        let pairOf: [Int]
        /// The (session, snapshot, ad) of every click that names a snapshot.
        private let namedAds: Set<SnapshotAd>
        private let readsSessions: Bool

        /// `day`: the day the batch is received on, when the caller fixed it (else the database's).
        init(_ batch: Batch, day: Timestamp?) {
            let events = batch.events
            var statements = [EventIDLedger.lookup(IdentityColumns.uuids(batch.primaries.map { events[$0].eventID }))]
            var indexOfPair: [SessionAd: Int] = [:]
            indexOfPair.reserveCapacity(batch.primaries.count)
            var pairs: [SessionAd] = []
            pairs.reserveCapacity(batch.primaries.count)
            var pairOf = [Int](repeating: -1, count: events.count)
            var sessions: Set<String> = []
            var clickSessions: Set<String> = []
            var namedAds: Set<SnapshotAd> = []
            for index in batch.primaries {
                let event = events[index]
                let pair = SessionAd(sessionID: event.sessionID, adID: event.adID)
                if let known = indexOfPair[pair] {
                    pairOf[index] = known
                } else {
                    pairOf[index] = pairs.count
                    indexOfPair[pair] = pairs.count
                    pairs.append(pair)
                }
                sessions.insert(event.sessionID)
                guard event.type == .click else { continue }
                clickSessions.insert(event.sessionID)
                if let snapshotID = event.snapshotID {
                    namedAds.insert(SnapshotAd(sessionID: event.sessionID, snapshotID: snapshotID, adID: event.adID))
                }
            }
            self.pairs = pairs
            self.pairOf = pairOf
            self.namedAds = namedAds
            readsSessions = !sessions.isEmpty
            if readsSessions {
                let sorted = sessions.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
                statements.append(CountingState.lockSessions(sorted, clicks: sorted.map(clickSessions.contains), day: day))
            }
            statements.append(CountingState.readPairs(pairs))
            self.statements = statements
        }

        /// The snapshots (and clicked ads in them) that clicks name which are not their session's
        /// current one.
        func earlierSnapshotsNamed(current sessions: [String: CountingState.SessionRow])
            -> (snapshots: [SessionSnapshot], ads: [(named: SessionSnapshot, adID: String)]) {
            var snapshots: Set<SessionSnapshot> = []
            var ads: [(named: SessionSnapshot, adID: String)] = []
            for ad in namedAds where sessions[ad.sessionID].map({ $0.currentSnapshotID != ad.snapshotID }) ?? false {
                let snapshot = SessionSnapshot(sessionID: ad.sessionID, snapshotID: ad.snapshotID)
                snapshots.insert(snapshot)
                ads.append((snapshot, ad.adID))
            }
            return (Array(snapshots), ads)
        }

        func facts(from results: [PostgresResult]) throws -> Facts {
            var facts = Facts(pairs: [CountingState.PairRow?](repeating: nil, count: pairs.count))
            var next = 0
            func result() -> PostgresResult? {
                defer { next += 1 }
                return results.indices.contains(next) ? results[next] : nil
            }
            if let ledger = result() { facts.ledger = try EventIDLedger.entries(ledger) }
            if readsSessions, let sessions = result() {
                for row in sessions.rows {
                    let session = try CountingState.SessionRow(row)
                    facts.sessions[session.sessionID] = session
                }
            }
            if let rows = result() {
                for row in rows.rows {
                    let pair = try CountingState.PairRow(row)
                    if facts.pairs.indices.contains(pair.index) { facts.pairs[pair.index] = pair }
                }
            }
            return facts
        }
    }

    /// What the first round trip read.
    struct Facts {
        var ledger: [String: EventIDLedger.Entry] = [:]
        /// The locked sessions that exist.
        var sessions: [String: CountingState.SessionRow] = [:]
        /// By pair index: the pair's row, nil when its ad was never served to its session.
        var pairs: [CountingState.PairRow?]
        /// Snapshots clicks named that are their session's, but not its current one.
        var earlierSnapshots: [SessionSnapshot: CountingState.SnapshotRow] = [:]
        var snapshotPositions: [SnapshotAd: Int32] = [:]

        init(pairs: [CountingState.PairRow?]) {
            self.pairs = pairs
        }

        /// The results of `readEarlierSnapshots` and `readSnapshotAds`.
        mutating func addHistory(snapshots: PostgresResult, ads: PostgresResult) throws {
            for row in snapshots.rows {
                let snapshot = try CountingState.SnapshotRow(row)
                earlierSnapshots[SessionSnapshot(sessionID: snapshot.sessionID, snapshotID: snapshot.snapshotID)] = snapshot
            }
            for row in ads.rows {
                let ad = try CountingState.SnapshotAdRow(row)
                snapshotPositions[SnapshotAd(sessionID: ad.sessionID, snapshotID: ad.snapshotID, adID: ad.adID)] = ad.position
            }
        }
    }

    struct SnapshotAd: Hashable {
        let sessionID: String
        let snapshotID: String
        let adID: String
    }

    /// Applies rules 3 and 4 to a batch's fresh events in request order, keeping what earlier
    /// events of the batch changed: the pairs with a candidate impression, the accepted clicks.
    struct Judge {
        let clickRule: ClickRule
        let events: [EventInput]
        let reads: Reads
        let facts: Facts
        let receivedAt: Timestamp
        /// By pair index: the event index of the impression that claims the pair, -1 for none.
        private var candidate: [Int]
        /// The pairs that have a candidate, in the order they got it.
        private(set) var impressionCandidatePairs: [Int] = []
        /// Impressions of a pair after its candidate: settled with it, once it is known whether
        /// the pair is still served.
        private var followers: [Int: [Int]] = [:]
        /// The last click accepted in this batch, per pair index and per session.
        private var acceptedClickOnPair: [Int: String] = [:]
        private var acceptedInSession: [String: ClickRule.AcceptedClick] = [:]

        init(clickRule: ClickRule, batch: Batch, reads: Reads, facts: Facts, receivedAt: Timestamp) {
            self.clickRule = clickRule
            self.events = batch.events
            self.reads = reads
            self.facts = facts
            self.receivedAt = receivedAt
            candidate = [Int](repeating: -1, count: reads.pairs.count)
        }

        /// The outcome of the event at `index` now, or nil for an impression whose pair's claim
        /// settles it.
        mutating func decide(_ event: EventInput, index: Int) -> EventOutcome? {
            let pair = reads.pairOf[index]
            switch event.type {
            case .impression:
                if candidate[pair] >= 0 {
                    followers[pair, default: []].append(index)
                    return nil
                }
                let row = facts.pairs[pair]
                switch ImpressionRule.judge(event, ImpressionRule.Facts(served: row != nil, counted: row?.impressionCounted ?? false)) {
                case .claim:
                    candidate[pair] = index
                    impressionCandidatePairs.append(pair)
                    return nil
                case .outcome(let outcome):
                    return outcome
                }
            case .click:
                let outcome = clickRule.judge(event, clickFacts(event, pair), receivedAt: receivedAt)
                if outcome == .accepted {
                    acceptedClickOnPair[pair] = event.eventID
                    acceptedInSession[event.sessionID] = ClickRule.AcceptedClick(adID: event.adID, occurredAt: event.occurredAt)
                }
                return outcome
            }
        }

        /// What the click rule asks about `click`: the session's state as read under its lock,
        /// with this batch's earlier accepted clicks applied.
        private func clickFacts(_ click: EventInput, _ pair: Int) -> ClickRule.Facts {
            let session = facts.sessions[click.sessionID]
            let row = facts.pairs[pair]
            var result = ClickRule.Facts()
            if let current = session?.currentSnapshotID {
                result.current = ClickRule.Feed(snapshotID: current, adPosition: row?.currentPosition)
            }
            if let named = click.snapshotID, named != session?.currentSnapshotID,
               let snapshot = facts.earlierSnapshots[SessionSnapshot(sessionID: click.sessionID, snapshotID: named)],
               let replacedAt = snapshot.replacedAt {
                let position = facts.snapshotPositions[SnapshotAd(sessionID: click.sessionID, snapshotID: named, adID: click.adID)]
                result.named = ClickRule.EarlierSnapshot(feed: ClickRule.Feed(snapshotID: named, adPosition: position),
                                                         registeredAt: snapshot.registeredAt, replacedAt: replacedAt)
            }
            result.lastAcceptedOnAdReceivedAt = acceptedClickOnPair[pair] != nil ? receivedAt : row?.lastClickAt
            result.lastAcceptedInSession = acceptedInSession[click.sessionID] ?? session?.lastAcceptedClick
            return result
        }

        /// The claims on the pairs' rows, in key order.
        func claims() -> [CountingState.PairClaim] {
            var claims: [CountingState.PairClaim] = []
            claims.reserveCapacity(impressionCandidatePairs.count + acceptedClickOnPair.count)
            for pair in impressionCandidatePairs {
                claims.append(CountingState.PairClaim(pair: reads.pairs[pair], pairIndex: pair, impressionEventID: events[candidate[pair]].eventID,
                                                      clickEventID: acceptedClickOnPair[pair]))
            }
            for (pair, eventID) in acceptedClickOnPair where candidate[pair] < 0 {
                claims.append(CountingState.PairClaim(pair: reads.pairs[pair], pairIndex: pair, impressionEventID: nil, clickEventID: eventID))
            }
            return claims.sorted { $0.pair < $1.pair }
        }

        /// The outcomes of the impressions left to their claims: the candidate is accepted if it
        /// won; otherwise a concurrent claim counted the pair first (a duplicate), or the pair's
        /// row went away and the ad is no longer served. Followers repeat the candidate's pair.
        func settleImpressions(won: [Bool], stillServed: [Bool]) -> [(Int, EventOutcome)] {
            var settled: [(Int, EventOutcome)] = []
            settled.reserveCapacity(impressionCandidatePairs.count)
            for pair in impressionCandidatePairs {
                let first = candidate[pair]
                let served = won[pair] || stillServed[pair]
                for index in [first] + (followers[pair] ?? []) {
                    if index == first && won[pair] {
                        settled.append((index, .accepted))
                    } else if case .outcome(let outcome) = ImpressionRule.judge(events[index], ImpressionRule.Facts(served: served, counted: true)) {
                        settled.append((index, outcome))
                    }
                }
            }
            return settled
        }

        /// Each session's last click accepted in this batch.
        func lastAcceptedClicks() -> [(sessionID: String, click: ClickRule.AcceptedClick)] {
            acceptedInSession.map { ($0.key, $0.value) }.sorted { $0.sessionID.utf8.lexicographicallyPrecedes($1.sessionID.utf8) }
        }
    }
}
