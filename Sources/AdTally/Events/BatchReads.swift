import Contract
import Postgres

/// The first round trip of a batch's transaction: what rules 2 to 4 read, with the locks their
/// verdicts need (`CountingState`): the ledger entries of the batch's ids, the sessions' rows
/// (locked when they have clicks, and marked active today), and every pair's row.
struct BatchReads {
    private let batch: EventBatch
    /// The (session, snapshot, ad) of every click that names a snapshot.
    private let namedAds: Set<SnapshotAd>
    private let ledger: PostgresPipeline.Handle<[EventKey: LedgerEntry]>
    private let sessions: PostgresPipeline.Handle<[String: CountingState.SessionRow]>?
    private let pairRows: PostgresPipeline.Handle<[CountingState.PairRow]>

    /// Adds the reads of `batch` to `pipeline`, after `adtally_begin_batch` (which sets the day its
    /// sessions are marked active on).
    init(_ batch: EventBatch, topology: EventTopology, adding pipeline: inout PostgresPipeline) {
        self.batch = batch
        let events = batch.events
        var sessions: Set<String> = []
        var clickSessions: Set<String> = []
        var namedAds: Set<SnapshotAd> = []
        for index in batch.primaries {
            let event = events[index]
            sessions.insert(event.sessionID)
            guard event.type == .click else { continue }
            clickSessions.insert(event.sessionID)
            if let snapshotID = event.snapshotID {
                namedAds.insert(SnapshotAd(sessionID: event.sessionID, snapshotID: snapshotID, adID: event.adID))
            }
        }
        self.namedAds = namedAds
        ledger = pipeline.add(EventIDLedger.lookup(batch.primaries.map { EventKey(events[$0]) }, topology: topology), decoding: EventIDLedger.entries)
        if sessions.isEmpty {
            self.sessions = nil
        } else {
            let sorted = sessions.sorted { $0.utf8Precedes($1) }
            self.sessions = pipeline.add(CountingState.lockSessions(sorted, clicks: sorted.map(clickSessions.contains), topology: topology)) { result in
                var rows: [String: CountingState.SessionRow] = [:]
                for row in result.rows {
                    let session = try CountingState.SessionRow(row)
                    rows[session.sessionID] = session
                }
                return rows
            }
        }
        pairRows = pipeline.add(CountingState.readPairs(batch.pairs, topology: topology)) { try $0.rows.map(CountingState.PairRow.init) }
    }

    /// What the round trip read.
    func facts(from results: PostgresPipelineResults) throws -> BatchFacts {
        var facts = BatchFacts(pairCount: batch.pairs.count)
        facts.ledger = try results[ledger]
        if let sessions { facts.sessions = try results[sessions] }
        for pair in try results[pairRows] where facts.pairs.indices.contains(pair.index) {
            facts.pairs[pair.index] = pair
        }
        return facts
    }

    /// The batch's sessions none of whose pairs has a row: the only ones that may be erased (API
    /// 1.4). An erasure deletes the session's pair rows in the transaction that records its digest
    /// (`ErasureStore`), and a feed registration of an erased session is refused, so a session with
    /// a pair row read after that commit is not erased; a transaction that read its pair rows
    /// before it has stamped its events before it, and the erasure waits for it to end. The list of
    /// erased sessions is read for the others only (junk and erased traffic), in a later round trip.
    func sessionsWithoutPairRows(_ facts: BatchFacts) -> [String] {
        var served: Set<String> = []
        for (index, pair) in batch.pairs.enumerated() where facts.pairs[index] != nil {
            served.insert(pair.sessionID)
        }
        var unserved: Set<String> = []
        for pair in batch.pairs where !served.contains(pair.sessionID) {
            unserved.insert(pair.sessionID)
        }
        return unserved.sorted { $0.utf8Precedes($1) }
    }

    /// The snapshots (and clicked ads in them) that clicks name which are not their session's
    /// current one: the grace window's candidates, read only when there are any.
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
}

/// What a batch's transaction read before judging.
struct BatchFacts {
    var ledger: [EventKey: LedgerEntry] = [:]
    /// The locked sessions that exist.
    var sessions: [String: CountingState.SessionRow] = [:]
    /// The batch's sessions that are erased: their events are refused and stored nowhere.
    var erased: Set<String> = []
    /// By pair index: the pair's row, nil when its ad was never served to its session.
    var pairs: [CountingState.PairRow?]
    /// Snapshots clicks named that are their session's, but not its current one.
    var earlierSnapshots: [SessionSnapshot: CountingState.SnapshotRow] = [:]
    var snapshotPositions: [SnapshotAd: Int32] = [:]

    init(pairCount: Int) {
        pairs = Array(repeating: nil, count: pairCount)
    }

    /// Reads which of `sessions` are erased, in one round trip of `transaction`.
    mutating func readErased(_ sessions: [String], in transaction: PostgresTransaction) throws {
        var pipeline = PostgresPipeline()
        let handle = pipeline.add(Self.erasedAmong(sessions)) { result in
            Set(try result.rows.map { try $0.decode(String.self, at: 0) })
        }
        erased = try transaction.run(pipeline)[handle]
    }

    /// Those of `sessionIDs` that are erased (`erased_sessions` keeps the SHA-256 digest of an erased
    /// id's UTF-8, API 1.4). One index probe a session; on Citus a read of a reference table,
    /// local on every node.
    static func erasedAmong(_ sessionIDs: [String]) -> PostgresQuery {
        """
        SELECT u.s FROM unnest(\(PostgresBinaryArray.text(sessionIDs))::text[]) AS u(s)
        WHERE EXISTS (SELECT 1 FROM erased_sessions e WHERE e.digest = sha256(convert_to(u.s, 'UTF8')))
        """
    }

    /// Reads the earlier snapshots that clicks name (`BatchReads.earlierSnapshotsNamed`) and
    /// where the clicked ads are in them, in one round trip of `transaction`.
    mutating func readHistory(_ named: (snapshots: [SessionSnapshot], ads: [(named: SessionSnapshot, adID: String)]),
                              topology: EventTopology, in transaction: PostgresTransaction) throws {
        var pipeline = PostgresPipeline()
        let snapshots = pipeline.add(CountingState.readEarlierSnapshots(named.snapshots, topology: topology)) { try $0.rows.map(CountingState.SnapshotRow.init) }
        let ads = pipeline.add(CountingState.readSnapshotAds(named.ads, topology: topology)) { try $0.rows.map(CountingState.SnapshotAdRow.init) }
        let results = try transaction.run(pipeline)
        for snapshot in try results[snapshots] {
            earlierSnapshots[SessionSnapshot(sessionID: snapshot.sessionID, snapshotID: snapshot.snapshotID)] = snapshot
        }
        for ad in try results[ads] {
            snapshotPositions[SnapshotAd(sessionID: ad.sessionID, snapshotID: ad.snapshotID, adID: ad.adID)] = ad.position
        }
    }
}

/// A clicked ad in a snapshot the click names, with its session.
struct SnapshotAd: Hashable {
    let sessionID: String
    let snapshotID: String
    let adID: String
}
