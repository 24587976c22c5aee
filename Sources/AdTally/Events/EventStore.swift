import Foundation
import Postgres

/// Applies the counting rules of API.md section 2 (rules 2 to 5) to well-formed events, inside the
/// caller's transaction. Every decision that must hold across processes is taken by PostgreSQL:
/// the event id ledger's primary key (idempotency), and a conditional update of the pair's
/// `session_ads` row, under its row lock (one impression per ad per session, one click per
/// window). Whatever the batch size, the work is a fixed handful of set-based statements.
public struct EventStore: Sendable {
    /// Seconds within which a repeated click is a duplicate.
    public let clickWindowSeconds: Int

    public init(clickWindowSeconds: Int) {
        self.clickWindowSeconds = clickWindowSeconds
    }

    /// Decides and stores `events` (in order), returning one outcome each. Must run inside a
    /// transaction: the outcomes are only true once it commits.
    ///
    /// `optimisticIDs`: claim the event ids with a plain insert, which costs PostgreSQL about a
    /// third less than the insert that skips taken ids, on the bet that none is taken (retries are
    /// rare). When one is, the statement fails with an error for which `isEventIDTaken` is true,
    /// the transaction is lost, and the caller runs it again without the bet.
    public func ingest(_ events: [EventInput], receivedAt: Timestamp, optimisticIDs: Bool = false,
                       on connection: PostgresConnection) throws -> [EventOutcome] {
        guard !events.isEmpty else { return [] }
        var outcomes = [EventOutcome?](repeating: nil, count: events.count)

        // Within one batch, an event id seen again is settled by its first occurrence.
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

        // Rule 2: claim every new id; ids that are taken are replays or conflicts.
        let primaryColumns = IdentityColumns(repeats.isEmpty ? events : primaries.map { events[$0] })
        let takenPositions = optimisticIDs
            ? try claimNewEventIDs(primaryColumns, count: primaries.count, receivedAt: receivedAt, on: connection)
            : try claimEventIDs(primaryColumns, count: primaries.count, receivedAt: receivedAt, on: connection)
        let taken = takenPositions.sorted().map { primaries[$0] }
        if !taken.isEmpty {
            let stored = try storedEvents(ids: taken.map { events[$0].eventID }, on: connection)
            for index in taken {
                let event = events[index]
                if let original = stored[event.eventID], original.type == event.type.rawValue,
                   original.sessionID == event.sessionID, original.adID == event.adID {
                    outcomes[index] = original.outcome
                } else {
                    outcomes[index] = .rejected(.eventIDConflict)
                }
            }
        }
        let fresh = takenPositions.isEmpty ? primaries : primaries.enumerated().filter { !takenPositions.contains($0.offset) }.map(\.element)
        // Usually nothing is taken: the fresh events are the primaries, and their columns are reused.
        let freshColumns = takenPositions.isEmpty ? primaryColumns : IdentityColumns(fresh.map { events[$0] })

        // Rules 3 and 4, first in one statement that reads every pair's facts and lets each pair's
        // first candidate of each type claim the pair's row, the rule checked on the row under its
        // lock (`claimDirectly`). That settles most events.
        let direct = try claimDirectly(fresh, of: events, receivedAt: receivedAt, on: connection)
        for (index, outcome) in direct.decided { outcomes[index] = outcome }
        // Then every event that did not win that way, from the facts about its pair that the same
        // statement read: its reason, or (clicks of one pair naming different rows) a claim of its
        // own. A candidate that lost although those facts let it claim met a concurrent change:
        // its pair is read again, as committed now.
        var facts = direct.facts
        if !direct.raced.isEmpty {
            let again = try feedFacts(sessionIDs: direct.raced.map(\.sessionID), adIDs: direct.raced.map(\.adID),
                                      receivedAt: receivedAt, on: connection)
            for pair in direct.raced { facts[pair] = again[pair] ?? FeedFact() }
        }
        let rest = direct.decided.isEmpty ? fresh : fresh.filter { outcomes[$0] == nil }
        var impressionClaims: [Int] = []
        var clickAttempts: [Int] = []
        var laterInBatch: [(index: Int, first: Int)] = []  // an event and the batch's first candidate for its pair
        var firstCandidate: [PairKey: Int] = [:]
        for index in rest {
            let event = events[index]
            let fact = facts[SessionAd(sessionID: event.sessionID, adID: event.adID)] ?? FeedFact()
            if let decided = Self.preliminaryOutcome(of: event, fact: fact) {
                outcomes[index] = decided
                continue
            }
            let pair = PairKey(type: event.type, sessionID: event.sessionID, adID: event.adID)
            if let first = firstCandidate[pair] {
                laterInBatch.append((index, first))
                continue
            }
            firstCandidate[pair] = index
            if let counted = Self.alreadyCounted(event, fact: fact) {
                // Settled by a committed claim: no row to lock, so concurrent batches do not wait on each other.
                outcomes[index] = counted
            } else if event.type == .impression {
                impressionClaims.append(index)
            } else {
                clickAttempts.append(index)
            }
        }
        let won = try claim(impressions: impressionClaims.map { events[$0] }, clicks: clickAttempts.map { events[$0] },
                            receivedAt: receivedAt, on: connection)
        for index in impressionClaims + clickAttempts {
            let event = events[index]
            let key = PairKey(type: event.type, sessionID: event.sessionID, adID: event.adID)
            outcomes[index] = won.contains(key) ? .accepted : Self.repeated(event.type)
        }
        for (index, first) in laterInBatch {
            // The batch shares one received_at. With a click window, the first candidate of the pair
            // is accepted now or was counted before: this one repeats it. Without one (0 seconds),
            // nothing is within the window and this click fares as the first one did.
            outcomes[index] = events[index].type == .click && clickWindowSeconds == 0 ? outcomes[first] : Self.repeated(events[index].type)
        }

        // Rule 5: store every fresh event with its outcome.
        try insertEvents(fresh, of: events, outcomes: outcomes, columns: freshColumns, receivedAt: receivedAt, on: connection)

        // Repeats of an id inside the batch answer as their first occurrence did (or conflict).
        for (index, first) in repeats {
            let event = events[index]
            let original = events[first]
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

    /// The outcome that needs no claim (a rejection), or nil when the event is a candidate.
    static func preliminaryOutcome(of event: EventInput, fact: FeedFact) -> EventOutcome? {
        switch event.type {
        case .impression:
            guard fact.served else { return .rejected(.adNotServed) }
            if !Self.passesViewability(event) { return .rejected(.notViewable) }
            return nil
        case .click:
            guard let current = fact.currentSnapshotID, let position = fact.currentPosition else {
                return .rejected(.adNotInFeed)
            }
            if let snapshotID = event.snapshotID, snapshotID != current { return .rejected(.staleSnapshot) }
            if let claimed = event.position, claimed != position { return .rejected(.positionMismatch) }
            return nil
        }
    }

    /// The viewable-impression rule: an impression that reports visibility counts only when at
    /// least half of the ad was seen for at least a second; one that reports none passes.
    static func passesViewability(_ event: EventInput) -> Bool {
        guard let visibility = event.visibility else { return true }
        return visibility.fraction >= 0.5 && visibility.milliseconds >= 1000
    }

    /// The duplicate outcome when a committed claim already settles the event: the impression of
    /// this pair was counted, or this pair's click window is still open at the batch's `received_at`.
    /// Both only ever move one way (a claim is never removed, a window's start only grows), so a
    /// committed row that says "duplicate" stays true whatever runs concurrently. Nil: the event must
    /// try its claim.
    static func alreadyCounted(_ event: EventInput, fact: FeedFact) -> EventOutcome? {
        switch event.type {
        case .impression: return fact.impressionClaimed ? repeated(.impression) : nil
        case .click: return fact.clickWindowOpen ? repeated(.click) : nil
        }
    }

    static func repeated(_ type: EventType) -> EventOutcome {
        .duplicate(type == .impression ? .impressionAlreadyCounted : .clickWithinWindow)
    }

    struct PairKey: Hashable {
        let type: EventType
        let sessionID: String
        let adID: String
    }

    /// The identity columns of a list of events as array parameters, encoded once and shared by
    /// every statement that takes the same events in the same order (the id claim, the feed facts
    /// and the insert of a batch in which no id was taken).
    struct IdentityColumns {
        let eventIDs: any PostgresBindable
        let sessionIDs: PostgresBinaryArray
        let types: PostgresBinaryArray
        let adIDs: PostgresBinaryArray

        init(_ events: [EventInput]) {
            eventIDs = EventStore.uuids(events.map(\.eventID))
            sessionIDs = .text(events.map(\.sessionID))
            types = .text(events.map(\.type.rawValue))
            adIDs = .text(events.map(\.adID))
        }
    }

    struct SessionAd: Hashable {
        let sessionID: String
        let adID: String
    }

    /// What the database knows about an ad in a session.
    struct FeedFact {
        /// The ad is in some snapshot registered for the session.
        var served = false
        /// The session's current snapshot, if any.
        var currentSnapshotID: String?
        /// The ad's row in the current snapshot, nil when it is not there.
        var currentPosition: Int32?
        /// A committed impression claim exists for the pair (its impression was counted).
        var impressionClaimed = false
        /// The pair's last accepted click is within the click window of the batch's `received_at`.
        var clickWindowOpen = false
    }

    struct StoredEvent {
        let sessionID: String
        let type: String
        let adID: String
        let outcome: EventOutcome
    }

    /// Claims the ids of `events` in the ledger; returns the positions (in `events`) of the ids that
    /// were taken already. The claim answers only how many rows it inserted: usually all of them,
    /// and then nothing else is asked or sent back. Otherwise a second statement finds the taken ids:
    /// after the claim every id has a ledger row, and the rows this transaction did not write
    /// (`xmin` is not its id; `ingest` runs without savepoints, so no row carries a subtransaction's
    /// id) belong to other events.
    private func claimEventIDs(_ columns: IdentityColumns, count: Int, receivedAt: Timestamp, on connection: PostgresConnection) throws -> Set<Int> {
        guard count > 0 else { return [] }
        let inserted = try connection.query("""
            WITH claimed AS (
                INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at)
                SELECT e, s, t, a, $5 FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS u(e, s, t, a) ORDER BY e
                ON CONFLICT (event_id) DO NOTHING
                RETURNING 1
            )
            SELECT count(*) FROM claimed
            """, [
                columns.eventIDs, columns.sessionIDs, columns.types, columns.adIDs, receivedAt,
            ]).first?.decode(Int.self, at: 0)
        if inserted == count { return [] }
        let rows = try connection.query("""
            SELECT u.n - 1 FROM unnest($1::uuid[]) WITH ORDINALITY AS u(e, n)
            JOIN event_ids i ON i.event_id = u.e
            WHERE i.xmin <> pg_current_xact_id()::xid
            """, [columns.eventIDs]).rows
        return Set(try rows.map { try $0.decode(Int.self, at: 0) }.filter((0..<count).contains))
    }

    /// Whether `error` is the optimistic id claim finding an id taken (see `ingest`).
    public static func isEventIDTaken(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        return error.isUniqueViolation && error.constraint == "event_ids_pkey"
    }

    /// Claims the ids of `events`, all of which must be new: a plain insert, failing on the first
    /// id that is taken (or being claimed by a transaction that then commits). Returns no taken
    /// positions, as `claimEventIDs` would when none is taken.
    private func claimNewEventIDs(_ columns: IdentityColumns, count: Int, receivedAt: Timestamp, on connection: PostgresConnection) throws -> Set<Int> {
        guard count > 0 else { return [] }
        try connection.query("""
            INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at)
            SELECT e, s, t, a, $5 FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS u(e, s, t, a) ORDER BY e
            """, [columns.eventIDs, columns.sessionIDs, columns.types, columns.adIDs, receivedAt])
        return []
    }

    /// The original identity and outcome of events whose ids are taken. The ledger row gives the
    /// event's ad_id and received_at, and events_ad_received_idx leads from those to the event.
    private func storedEvents(ids: [String], on connection: PostgresConnection) throws -> [String: StoredEvent] {
        let rows = try connection.query("""
            SELECT i.event_id::text, i.session_id, i.type, i.ad_id, e.status, e.reason
            FROM event_ids i
            JOIN events e ON e.ad_id = i.ad_id AND e.received_at = i.received_at AND e.event_id = i.event_id
            WHERE i.event_id = ANY ($1::uuid[])
            """, [PostgresArray(ids)]).rows
        var stored: [String: StoredEvent] = [:]
        for row in rows {
            let status = EventOutcome.Status(rawValue: try row.decode(String.self, at: 4)) ?? .rejected
            let reason = try row.decode(String?.self, at: 5).flatMap(EventOutcome.Reason.init(rawValue:))
            stored[try row.decode(String.self, at: 0)] = StoredEvent(
                sessionID: try row.decode(String.self, at: 1), type: try row.decode(String.self, at: 2),
                adID: try row.decode(String.self, at: 3), outcome: EventOutcome(status: status, reason: reason))
        }
        return stored
    }

    private func feedFacts(sessionIDs: [String], adIDs: [String], receivedAt: Timestamp, on connection: PostgresConnection) throws -> [SessionAd: FeedFact] {
        guard !sessionIDs.isEmpty else { return [:] }
        // One probe of session_ads' primary key per pair answers every question the rules ask:
        // served (the row exists), the row in the current snapshot, the impression claim and the
        // click window. LIMIT 1 keeps the probe a plain index scan in the prepared statement's
        // generic plan, which otherwise builds a bitmap per pair (about 10% slower, measured).
        let rows = try connection.query("""
            SELECT p.session_id, p.ad_id, x.session_id IS NOT NULL, x.current_snapshot_id, x.current_position,
                   x.impression_event_id IS NOT NULL,
                   coalesce(x.last_click_at > $3::timestamptz - make_interval(secs => $4::int), false)
            FROM (SELECT DISTINCT session_id, ad_id FROM unnest($1::text[], $2::text[]) AS u(session_id, ad_id)) p
            LEFT JOIN LATERAL (
                SELECT * FROM session_ads x WHERE x.session_id = p.session_id AND x.ad_id = p.ad_id LIMIT 1
            ) x ON true
            """, [PostgresBinaryArray.text(sessionIDs), PostgresBinaryArray.text(adIDs), receivedAt, clickWindowSeconds]).rows
        var facts: [SessionAd: FeedFact] = [:]
        facts.reserveCapacity(rows.count)
        for row in rows {
            facts[SessionAd(sessionID: try row.decode(String.self, at: 0), adID: try row.decode(String.self, at: 1))] = try Self.fact(in: row, at: 2)
        }
        return facts
    }

    /// The fact in five columns from `column` on: served, current snapshot, current position,
    /// impression claimed, click window open (as `feedFacts` selects them).
    private static func fact(in row: PostgresRow, at column: Int) throws -> FeedFact {
        FeedFact(served: try row.decode(Bool.self, at: column), currentSnapshotID: try row.decode(String?.self, at: column + 1),
                 currentPosition: try row.decode(Int64?.self, at: column + 2).map { Int32(truncatingIfNeeded: $0) },
                 impressionClaimed: try row.decode(Bool.self, at: column + 3), clickWindowOpen: try row.decode(Bool.self, at: column + 4))
    }

    /// What the direct claim settled, and what it read.
    struct DirectClaim {
        /// The outcomes of the groups whose candidate won.
        var decided: [(index: Int, outcome: EventOutcome)] = []
        /// The facts about every pair of the batch, as the statement's snapshot saw them.
        var facts: [SessionAd: FeedFact] = [:]
        /// Pairs whose candidate lost although `facts` let it claim: a concurrent transaction
        /// changed the row after the snapshot, so `facts` no longer tell why.
        var raced: [SessionAd] = []
    }

    /// The direct claim, which settles most events in one statement: it reads every pair's
    /// `session_ads` row once (by a primary-key probe) for its facts, and updates the rows whose
    /// rule lets a candidate claim, checking the rule again on the row under its lock. An
    /// impression claims when the row exists (the ad was served) and no impression is counted yet;
    /// a click, when the ad is in the current snapshot, at the snapshot and row the click names,
    /// and no accepted click is within the window. Per pair and type, the batch's first candidate
    /// claims (an impression that is viewable or silent about it; a click, when the pair's clicks
    /// in the batch all name the same snapshot and row) and its followers repeat it. Every other
    /// event is left to the caller, with the facts.
    ///
    /// Rows are updated in key order, as feed registration locks them, and every row this
    /// transaction will lock is locked here (rows of clicks left to `claim` by a no-op update), so
    /// no later statement waits for a row lock and two orders never meet. A row whose state in the
    /// snapshot fails the rule is skipped without waiting for its lock, and then the facts (same
    /// snapshot) say why. One that a concurrent transaction is changing is waited for and stays
    /// locked by this transaction; when its version moved, PostgreSQL skips it (the ctid no longer
    /// matches), and the caller judges its event again from the row as committed, under that lock.
    /// Of concurrent claims exactly one wins.
    private func claimDirectly(_ fresh: [Int], of events: [EventInput], receivedAt: Timestamp,
                               on connection: PostgresConnection) throws -> DirectClaim {
        // The events of each (pair, type), in batch order.
        var groupOf: [PairKey: Int] = [:]
        groupOf.reserveCapacity(fresh.count)
        var groups: [[Int]] = []
        for index in fresh {
            let event = events[index]
            let key = PairKey(type: event.type, sessionID: event.sessionID, adID: event.adID)
            if let group = groupOf[key] {
                groups[group].append(index)
            } else {
                groupOf[key] = groups.count
                groups.append([index])
            }
        }
        // One row per pair: an impression and a click of one pair share it.
        var rowOfPair: [SessionAd: Int] = [:]
        rowOfPair.reserveCapacity(groups.count)
        var pairs: [SessionAd] = []
        var impressionIDs: [String?] = [], clickIDs: [String?] = [], snapshotIDs: [String?] = [], positions: [Int32?] = []
        var holds: [Bool?] = []  // lock the row although no candidate claims it (see below)
        var impressionGroup: [Int] = [], clickGroup: [Int] = []  // the group behind each row's claim, -1 for none
        var candidates: [Int] = []  // per group: the index of its candidate's event, -1 for a group left to the facts
        candidates.reserveCapacity(groups.count)
        for (group, members) in groups.enumerated() {
            let first = events[members[0]]
            let pair = SessionAd(sessionID: first.sessionID, adID: first.adID)
            let row: Int
            if let existing = rowOfPair[pair] {
                row = existing
            } else {
                row = pairs.count
                rowOfPair[pair] = row
                pairs.append(pair)
                impressionIDs.append(nil); clickIDs.append(nil); snapshotIDs.append(nil); positions.append(nil)
                holds.append(false)
                impressionGroup.append(-1); clickGroup.append(-1)
            }
            switch first.type {
            case .impression:
                // A non-viewable impression is rejected, but only once the ad is known to be
                // served (ad_not_served comes first): the facts decide those, and the first
                // viewable one is the candidate.
                let candidate = members.first { Self.passesViewability(events[$0]) } ?? -1
                candidates.append(candidate)
                if candidate >= 0 {
                    impressionIDs[row] = events[candidate].eventID
                    impressionGroup[row] = group
                }
            case .click:
                let alike = members.allSatisfy { events[$0].snapshotID == first.snapshotID && events[$0].position == first.position }
                candidates.append(alike ? members[0] : -1)
                if alike {
                    clickIDs[row] = first.eventID
                    snapshotIDs[row] = first.snapshotID
                    positions[row] = first.position
                    clickGroup[row] = group
                } else {
                    // These clicks are settled by `claim`, a later statement. Their row is locked
                    // here, in key order with the others (a no-op update), so that no statement
                    // after this one waits for a lock: two lock orders in one transaction could
                    // deadlock with feed registration.
                    holds[row] = true
                }
            }
        }
        guard !pairs.isEmpty else { return DirectClaim() }
        // Rows must be locked in key order, the order of `u`, so `u` must drive the update: a hash
        // or merge join would lock them in the order of a scan of session_ads, which the planner
        // picks for a small table or a large batch. Only a nested loop over `u` with a Tid scan is
        // left (for the rest of the transaction, whose other statements join nothing or laterally).
        try connection.execute("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off")
        // The facts are the columns feedFacts selects, read by the probe that also finds the row
        // to update (LIMIT 1 keeps it a plain index scan in the generic plan). The click's
        // conditions are written out twice (SET and WHERE): a row is updated when either claim
        // wins, and each column changes only for its own claim.
        let rows = try connection.query("""
            WITH u AS MATERIALIZED (
                SELECT p.n, p.s, p.a, p.i, p.c, p.sn, p.p, p.h, x.ctid AS t, x.session_id IS NOT NULL AS served, x.current_snapshot_id,
                       x.current_position, x.impression_event_id IS NOT NULL AS claimed,
                       coalesce(x.last_click_at > $7::timestamptz - make_interval(secs => $8::int), false) AS window_open
                FROM unnest($1::text[], $2::text[], $3::uuid[], $4::uuid[], $5::text[], $6::int[], $9::bool[])
                     WITH ORDINALITY AS p(s, a, i, c, sn, p, h, n)
                LEFT JOIN LATERAL (
                    SELECT ctid, * FROM session_ads y WHERE y.session_id = p.s AND y.ad_id = p.a LIMIT 1
                ) x ON true
                ORDER BY p.s COLLATE "C", p.a COLLATE "C"
            ), won AS (
                UPDATE session_ads AS x SET
                    impression_event_id = CASE WHEN u.i IS NOT NULL AND x.impression_event_id IS NULL THEN u.i ELSE x.impression_event_id END,
                    impression_claimed_at = CASE WHEN u.i IS NOT NULL AND x.impression_event_id IS NULL THEN $7::timestamptz ELSE x.impression_claimed_at END,
                    last_click_event_id = CASE WHEN u.c IS NOT NULL AND x.current_snapshot_id IS NOT NULL AND x.current_position IS NOT NULL
                            AND (u.sn IS NULL OR u.sn = x.current_snapshot_id) AND (u.p IS NULL OR u.p = x.current_position)
                            AND (x.last_click_at IS NULL OR x.last_click_at <= $7::timestamptz - make_interval(secs => $8::int))
                        THEN u.c ELSE x.last_click_event_id END,
                    last_click_at = CASE WHEN u.c IS NOT NULL AND x.current_snapshot_id IS NOT NULL AND x.current_position IS NOT NULL
                            AND (u.sn IS NULL OR u.sn = x.current_snapshot_id) AND (u.p IS NULL OR u.p = x.current_position)
                            AND (x.last_click_at IS NULL OR x.last_click_at <= $7::timestamptz - make_interval(secs => $8::int))
                        THEN $7::timestamptz ELSE x.last_click_at END
                FROM u
                WHERE x.ctid = u.t AND x.session_id = u.s AND x.ad_id = u.a
                  AND (u.h OR (u.i IS NOT NULL AND x.impression_event_id IS NULL)
                       OR (u.c IS NOT NULL AND x.current_snapshot_id IS NOT NULL AND x.current_position IS NOT NULL
                           AND (u.sn IS NULL OR u.sn = x.current_snapshot_id) AND (u.p IS NULL OR u.p = x.current_position)
                           AND (x.last_click_at IS NULL OR x.last_click_at <= $7::timestamptz - make_interval(secs => $8::int))))
                RETURNING u.n, coalesce(x.impression_event_id = u.i, false), coalesce(x.last_click_event_id = u.c, false)
            )
            SELECT n - 1, false, served, current_snapshot_id, current_position, claimed, window_open FROM u
            UNION ALL
            SELECT n - 1, true, i, NULL, NULL, c, false FROM won AS w(n, i, c)
            """, [
                PostgresBinaryArray.text(pairs.map(\.sessionID)), PostgresBinaryArray.text(pairs.map(\.adID)), Self.uuids(impressionIDs),
                Self.uuids(clickIDs), PostgresBinaryArray.text(snapshotIDs), PostgresBinaryArray.int4(positions), receivedAt, clickWindowSeconds,
                PostgresBinaryArray.bool(holds),
            ]).rows
        var result = DirectClaim()
        result.facts.reserveCapacity(rows.count)
        result.decided.reserveCapacity(fresh.count)
        func settle(_ group: Int, won: Bool, fact: FeedFact, pair: SessionAd) {
            let candidate = candidates[group]
            guard won else {
                let event = events[candidate]
                if Self.preliminaryOutcome(of: event, fact: fact) == nil && Self.alreadyCounted(event, fact: fact) == nil {
                    result.raced.append(pair)
                }
                return
            }
            for index in groups[group] {
                if index == candidate {
                    result.decided.append((index, .accepted))
                } else if events[index].type == .impression {
                    // Followers that are not viewable are the facts' to reject (not_viewable).
                    if Self.passesViewability(events[index]) {
                        result.decided.append((index, Self.repeated(.impression)))
                    }
                } else {
                    // As in `ingest`: within a window the followers repeat the candidate; without
                    // one (0 seconds) they fare as it did.
                    result.decided.append((index, clickWindowSeconds == 0 ? .accepted : Self.repeated(.click)))
                }
            }
        }
        // Two kinds of rows, each naming its pair by position in the arrays sent: the facts of
        // every pair (second column false), and the pairs updated, with whether each claim won
        // (second column true; the row now records this batch's event id).
        var wonClaims: [Int: (impression: Bool, click: Bool)] = [:]
        for row in rows {
            let index = try row.decode(Int.self, at: 0)
            guard pairs.indices.contains(index) else { continue }
            if try row.decode(Bool.self, at: 1) {
                wonClaims[index] = (try row.decode(Bool.self, at: 2), try row.decode(Bool.self, at: 5))
            } else {
                result.facts[pairs[index]] = try Self.fact(in: row, at: 2)
            }
        }
        for (index, pair) in pairs.enumerated() {
            let fact = result.facts[pair] ?? FeedFact()
            let won = wonClaims[index]
            if impressionIDs[index] != nil {
                settle(impressionGroup[index], won: won?.impression ?? false, fact: fact, pair: pair)
            }
            if clickIDs[index] != nil {
                settle(clickGroup[index], won: won?.click ?? false, fact: fact, pair: pair)
            }
        }
        return result
    }

    /// The claim of candidates the direct claim left to the facts (after a concurrent change, or
    /// clicks of one pair naming different rows in one batch): claims the first impression of each
    /// pair and opens a click window for each click pair, in one upsert on the pairs' `session_ads`
    /// rows, in key order. The upsert locks each row and re-reads it, so of concurrent claims on one
    /// pair exactly one wins; a pair whose claims all lose is not returned. Returns the claims that
    /// won, recognised by the event id the row now records. Every row it touches was locked by
    /// `claimDirectly` earlier in the transaction, so it waits for no other transaction.
    private func claim(impressions: [EventInput], clicks: [EventInput], receivedAt: Timestamp, on connection: PostgresConnection) throws -> Set<PairKey> {
        guard !impressions.isEmpty || !clicks.isEmpty else { return [] }
        // One row per pair: an impression and a click of one pair in the same batch share it (one
        // upsert cannot touch a row twice).
        var rowOfPair: [SessionAd: Int] = [:]
        var pairs: [SessionAd] = []
        var impressionIDs: [String?] = [], clickIDs: [String?] = []
        func row(_ event: EventInput) -> Int {
            let pair = SessionAd(sessionID: event.sessionID, adID: event.adID)
            if let index = rowOfPair[pair] { return index }
            rowOfPair[pair] = pairs.count
            pairs.append(pair)
            impressionIDs.append(nil)
            clickIDs.append(nil)
            return pairs.count - 1
        }
        for event in impressions { impressionIDs[row(event)] = event.eventID }
        for event in clicks { clickIDs[row(event)] = event.eventID }

        let rows = try connection.query("""
            INSERT INTO session_ads AS x (session_id, ad_id, first_served_at,
                                          impression_event_id, impression_claimed_at, last_click_event_id, last_click_at)
            SELECT s, a, $5, i, CASE WHEN i IS NOT NULL THEN $5::timestamptz END, c, CASE WHEN c IS NOT NULL THEN $5::timestamptz END
            FROM unnest($1::text[], $2::text[], $3::uuid[], $4::uuid[]) AS u(s, a, i, c)
            ORDER BY s COLLATE "C", a COLLATE "C"
            ON CONFLICT (session_id, ad_id) DO UPDATE SET
                impression_event_id = coalesce(x.impression_event_id, EXCLUDED.impression_event_id),
                impression_claimed_at = coalesce(x.impression_claimed_at, EXCLUDED.impression_claimed_at),
                last_click_event_id = CASE WHEN EXCLUDED.last_click_event_id IS NOT NULL
                    AND (x.last_click_at IS NULL OR x.last_click_at <= EXCLUDED.last_click_at - make_interval(secs => $6::int))
                    THEN EXCLUDED.last_click_event_id ELSE x.last_click_event_id END,
                last_click_at = CASE WHEN EXCLUDED.last_click_event_id IS NOT NULL
                    AND (x.last_click_at IS NULL OR x.last_click_at <= EXCLUDED.last_click_at - make_interval(secs => $6::int))
                    THEN EXCLUDED.last_click_at ELSE x.last_click_at END
            WHERE (EXCLUDED.impression_event_id IS NOT NULL AND x.impression_event_id IS NULL)
               OR (EXCLUDED.last_click_event_id IS NOT NULL
                   AND (x.last_click_at IS NULL OR x.last_click_at <= EXCLUDED.last_click_at - make_interval(secs => $6::int)))
            RETURNING session_id, ad_id, impression_event_id::text, last_click_event_id::text, xmax = 0
            """, [
                PostgresBinaryArray.text(pairs.map(\.sessionID)), PostgresBinaryArray.text(pairs.map(\.adID)),
                Self.uuids(impressionIDs), Self.uuids(clickIDs), receivedAt, clickWindowSeconds,
            ]).rows
        var won: Set<PairKey> = []
        for row in rows {
            // Rows are created only by feed registration and never deleted, and every candidate's
            // row was read in this transaction: an insert here means that broke. Roll back rather
            // than make the ad look served.
            guard try !row.decode(Bool.self, at: 4) else {
                throw PostgresError(kind: .statementFailed, message: "an event claim created a session_ads row; rolled back")
            }
            let pair = SessionAd(sessionID: try row.decode(String.self, at: 0), adID: try row.decode(String.self, at: 1))
            guard let index = rowOfPair[pair] else { continue }
            // uuid_out writes lowercase; ids reach the store lowercase already (EventID.canonical).
            if let mine = impressionIDs[index], try row.decode(String?.self, at: 2) == mine.lowercased() {
                won.insert(PairKey(type: .impression, sessionID: pair.sessionID, adID: pair.adID))
            }
            if let mine = clickIDs[index], try row.decode(String?.self, at: 3) == mine.lowercased() {
                won.insert(PairKey(type: .click, sessionID: pair.sessionID, adID: pair.adID))
            }
        }
        return won
    }

    /// Event ids as a `uuid[]` parameter: binary, or text if one is not a UUID (the input layer
    /// only lets canonical ones through, so that fallback is for safety, not for use).
    fileprivate static func uuids(_ ids: [String?]) -> any PostgresBindable {
        PostgresBinaryArray.uuid(ids) ?? PostgresArray(ids)
    }

    /// Stores the events at `indices` of `events` with their outcomes; `columns` are the identity
    /// columns of exactly these events, in this order.
    private func insertEvents(_ indices: [Int], of events: [EventInput], outcomes: [EventOutcome?], columns: IdentityColumns,
                              receivedAt: Timestamp, on connection: PostgresConnection) throws {
        guard !indices.isEmpty else { return }
        // Every stored event was decided by `ingest` before the insert.
        let stored = indices.map { outcomes[$0] ?? .accepted }
        try connection.query("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                                snapshot_id, position, visible_fraction, visible_ms)
            SELECT s, e, t, a, st, r, o, $12, sn, p, vf, vm
            FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                        $8::text[], $9::int[], $10::float8[], $11::int[])
                 AS u(s, e, t, a, st, r, o, sn, p, vf, vm)
            """, [
                columns.sessionIDs, columns.eventIDs, columns.types, columns.adIDs,
                PostgresBinaryArray.text(stored.map(\.status.rawValue)), PostgresBinaryArray.text(stored.map(\.reason?.rawValue)),
                PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: indices.map { events[$0].occurredAt.microsecondsSinceEpoch }),
                PostgresBinaryArray.text(indices.map { events[$0].snapshotID }), PostgresBinaryArray.int4(indices.map { events[$0].position }),
                PostgresBinaryArray.float8(indices.map { events[$0].type == .impression ? events[$0].visibility?.fraction : nil }),
                PostgresBinaryArray.int4(indices.map { events[$0].type == .impression ? events[$0].visibility?.milliseconds : nil }),
                receivedAt,
            ])
    }
}
