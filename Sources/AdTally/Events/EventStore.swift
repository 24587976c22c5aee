import Foundation
import Postgres

/// Applies the counting rules of API.md section 2 (rules 2 to 5) to well-formed events, inside the
/// caller's transaction. Every decision that must hold across processes is taken by PostgreSQL:
/// the event id ledger's primary key (idempotency), the impression claim's primary key (one
/// impression per ad per session) and a conditional upsert on the click window row (one click per
/// window). Whatever the batch size, the work is a fixed handful of set-based statements.
public struct EventStore: Sendable {
    /// Seconds within which a repeated click is a duplicate.
    public let clickWindowSeconds: Int

    public init(clickWindowSeconds: Int) {
        self.clickWindowSeconds = clickWindowSeconds
    }

    /// Decides and stores `events` (in order), returning one outcome each. Must run inside a
    /// transaction: the outcomes are only true once it commits.
    public func ingest(_ events: [EventInput], receivedAt: Timestamp, on connection: PostgresConnection) throws -> [EventOutcome] {
        guard !events.isEmpty else { return [] }
        var outcomes = [EventOutcome?](repeating: nil, count: events.count)

        // Within one batch, an event id seen again is settled by its first occurrence.
        var firstIndexOfID: [String: Int] = [:]
        var primaries: [Int] = []
        for (index, event) in events.enumerated() where firstIndexOfID[event.eventID] == nil {
            firstIndexOfID[event.eventID] = index
            primaries.append(index)
        }

        // Rule 2: claim every new id; ids that are taken are replays or conflicts.
        let claimed = try claimEventIDs(primaries.map { events[$0] }, on: connection)
        let taken = primaries.filter { !claimed.contains(events[$0].eventID) }
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
        let fresh = primaries.filter { claimed.contains(events[$0].eventID) }

        // Rules 3 and 4: the facts about each (session, ad) pair, in one statement.
        let facts = try feedFacts(for: fresh.map { events[$0] }, on: connection)
        var impressionClaims: [Int] = []
        var clickAttempts: [Int] = []
        var laterInBatch: [Int: Int] = [:]  // event index -> index of the batch's first candidate for its pair
        var firstCandidate: [PairKey: Int] = [:]
        for index in fresh {
            let event = events[index]
            let pair = PairKey(type: event.type, sessionID: event.sessionID, adID: event.adID)
            let fact = facts[PairKey(type: .impression, sessionID: event.sessionID, adID: event.adID)] ?? FeedFact()
            if let decided = Self.preliminaryOutcome(of: event, fact: fact) {
                outcomes[index] = decided
                continue
            }
            if let first = firstCandidate[pair], !(event.type == .click && clickWindowSeconds == 0) {
                laterInBatch[index] = first
                continue
            }
            firstCandidate[pair] = index
            if event.type == .impression { impressionClaims.append(index) } else { clickAttempts.append(index) }
        }
        let won = try claim(impressions: impressionClaims.map { events[$0] }, clicks: clickAttempts.map { events[$0] },
                            receivedAt: receivedAt, on: connection)
        for index in impressionClaims + clickAttempts {
            let event = events[index]
            let key = PairKey(type: event.type, sessionID: event.sessionID, adID: event.adID)
            outcomes[index] = won.contains(key) ? .accepted
                : .duplicate(event.type == .impression ? .impressionAlreadyCounted : .clickWithinWindow)
        }
        for (index, _) in laterInBatch {
            // The first candidate of the pair is either accepted now or was already counted before:
            // either way this one repeats it.
            outcomes[index] = .duplicate(events[index].type == .impression ? .impressionAlreadyCounted : .clickWithinWindow)
        }

        // Rule 5: store every fresh event with its outcome.
        try insertEvents(fresh.map { (events[$0], outcomes[$0] ?? .accepted) }, receivedAt: receivedAt, on: connection)

        // Repeats of an id inside the batch answer as their first occurrence did (or conflict).
        for (index, event) in events.enumerated() where outcomes[index] == nil || firstIndexOfID[event.eventID] != index {
            guard let first = firstIndexOfID[event.eventID], first != index else { continue }
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
            if let visibility = event.visibility, !(visibility.fraction >= 0.5 && visibility.milliseconds >= 1000) {
                return .rejected(.notViewable)
            }
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

    struct PairKey: Hashable {
        let type: EventType
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
    }

    struct StoredEvent {
        let sessionID: String
        let type: String
        let adID: String
        let outcome: EventOutcome
    }

    private func claimEventIDs(_ events: [EventInput], on connection: PostgresConnection) throws -> Set<String> {
        guard !events.isEmpty else { return [] }
        let rows = try connection.query("""
            INSERT INTO event_ids (event_id, session_id, type, ad_id)
            SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) ORDER BY 1
            ON CONFLICT (event_id) DO NOTHING
            RETURNING event_id::text
            """, [
                PostgresArray(events.map(\.eventID)), PostgresArray(events.map(\.sessionID)),
                PostgresArray(events.map(\.type.rawValue)), PostgresArray(events.map(\.adID)),
            ]).rows
        return Set(try rows.map { try $0.decode(String.self, at: 0) })
    }

    private func storedEvents(ids: [String], on connection: PostgresConnection) throws -> [String: StoredEvent] {
        let rows = try connection.query("""
            SELECT i.event_id::text, i.session_id, i.type, i.ad_id, e.status, e.reason
            FROM event_ids i
            JOIN events e ON e.session_id = i.session_id AND e.event_id = i.event_id
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

    private func feedFacts(for events: [EventInput], on connection: PostgresConnection) throws -> [PairKey: FeedFact] {
        guard !events.isEmpty else { return [:] }
        // One index-only probe of snapshot_ads_served_idx per pair answers both questions: was the
        // ad ever served to the session, and at which row is it in the current snapshot.
        let rows = try connection.query("""
            SELECT p.session_id, p.ad_id, f.served, s.current_snapshot_id, f.current_position
            FROM (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS u(session_id, ad_id)) p
            LEFT JOIN sessions s ON s.session_id = p.session_id
            CROSS JOIN LATERAL (
                SELECT count(*) > 0 AS served,
                       max(a.position) FILTER (WHERE a.snapshot_id = s.current_snapshot_id) AS current_position
                FROM snapshot_ads a
                WHERE a.session_id = p.session_id AND a.ad_id = p.ad_id
            ) f
            """, [PostgresArray(events.map(\.sessionID)), PostgresArray(events.map(\.adID))]).rows
        var facts: [PairKey: FeedFact] = [:]
        for row in rows {
            let key = PairKey(type: .impression, sessionID: try row.decode(String.self, at: 0), adID: try row.decode(String.self, at: 1))
            facts[key] = FeedFact(served: try row.decode(Bool.self, at: 2), currentSnapshotID: try row.decode(String?.self, at: 3),
                                  currentPosition: try row.decode(Int64?.self, at: 4).map { Int32(truncatingIfNeeded: $0) })
        }
        return facts
    }

    /// Claims the first impression of each pair and opens a click window for each click pair, in
    /// one statement. Returns the pairs whose claim won. Rows are touched in key order so that
    /// concurrent batches lock them in the same order.
    private func claim(impressions: [EventInput], clicks: [EventInput], receivedAt: Timestamp, on connection: PostgresConnection) throws -> Set<PairKey> {
        guard !impressions.isEmpty || !clicks.isEmpty else { return [] }
        let rows = try connection.query("""
            WITH impressions AS (
                INSERT INTO impression_claims (session_id, ad_id, event_id, claimed_at)
                SELECT s, a, e, $7 FROM unnest($1::text[], $2::text[], $3::uuid[]) AS u(s, a, e) ORDER BY s, a
                ON CONFLICT (session_id, ad_id) DO NOTHING
                RETURNING 'impression'::text, session_id, ad_id
            ), clicks AS (
                INSERT INTO click_windows AS w (session_id, ad_id, last_accepted_at)
                SELECT s, a, $7 FROM unnest($4::text[], $5::text[]) AS u(s, a) ORDER BY s, a
                ON CONFLICT (session_id, ad_id) DO UPDATE SET last_accepted_at = EXCLUDED.last_accepted_at
                WHERE w.last_accepted_at <= EXCLUDED.last_accepted_at - make_interval(secs => $6::int)
                RETURNING 'click'::text, session_id, ad_id
            )
            SELECT * FROM impressions UNION ALL SELECT * FROM clicks
            """, [
                PostgresArray(impressions.map(\.sessionID)), PostgresArray(impressions.map(\.adID)), PostgresArray(impressions.map(\.eventID)),
                PostgresArray(clicks.map(\.sessionID)), PostgresArray(clicks.map(\.adID)), clickWindowSeconds, receivedAt,
            ]).rows
        var won: Set<PairKey> = []
        for row in rows {
            let type: EventType = try row.decode(String.self, at: 0) == "click" ? .click : .impression
            won.insert(PairKey(type: type, sessionID: try row.decode(String.self, at: 1), adID: try row.decode(String.self, at: 2)))
        }
        return won
    }

    private func insertEvents(_ rows: [(EventInput, EventOutcome)], receivedAt: Timestamp, on connection: PostgresConnection) throws {
        guard !rows.isEmpty else { return }
        let events = rows.map(\.0)
        try connection.query("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at,
                                snapshot_id, position, visible_fraction, visible_ms)
            SELECT s, e, t, a, st, r, o, $13, sn, p, vf, vm
            FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                        $8::text[], $9::int[], $10::float8[], $11::int[], $12::int[])
                 AS u(s, e, t, a, st, r, o, sn, p, vf, vm, ord)
            ORDER BY ord
            """, [
                PostgresArray(events.map(\.sessionID)), PostgresArray(events.map(\.eventID)), PostgresArray(events.map(\.type.rawValue)),
                PostgresArray(events.map(\.adID)), PostgresArray(rows.map(\.1.status.rawValue)), PostgresArray(rows.map { $0.1.reason?.rawValue }),
                PostgresArray(events.map(\.occurredAt)), PostgresArray(events.map(\.snapshotID)), PostgresArray(events.map(\.position)),
                PostgresArray(events.map { $0.type == .impression ? $0.visibility?.fraction : nil }),
                PostgresArray(events.map { $0.type == .impression ? $0.visibility?.milliseconds : nil }),
                PostgresArray(Array(0..<Int64(rows.count))), receivedAt,
            ])
    }
}
