import Contract
import Postgres
import Timestamps

/// The `event_ids` ledger that rule 2 (`IdempotencyRule`) reads: an event id is taken once per
/// session (API 1.3 scopes an id to its session; the key is `(session_id, event_id)`), with the
/// identity a replay must match and the outcome it was answered with, so that a replay is answered
/// from its ledger row alone. Keyed by session, the ledger lives with the session's other rows
/// (one shard on Citus).
///
/// A batch looks its ids up first and records the fresh ones last, with their outcomes, by a plain
/// insert: nothing is written for a replay, and PostgreSQL logs no error for one. Only an id that a
/// concurrent transaction (of another process: one process never runs two transactions that share
/// an id, see `CommitQueue`) records between the two fails the insert, with an error for which
/// `isEventIDTaken` is true; the batch is then run again and finds it.
enum EventIDLedger {
    /// A ledger row, read into the plain value rule 2 judges.
    static func entry(_ row: PostgresRow) throws -> LedgerEntry {
        var columns = row.columns()
        let eventID = try columns.next(String.self)
        let sessionID = try columns.next(String.self)
        let type = try columns.next(String.self)
        let adID = try columns.next(String.self)
        let status = try columns.next(String.self)
        let reason = try columns.next(String?.self)
        // The table's checks admit only the contract's statuses; an unknown reason (a newer
        // version's) is kept as none rather than failing the replay.
        return LedgerEntry(eventID: eventID, sessionID: sessionID, type: type, adID: adID,
                           outcome: EventOutcome(status: EventOutcome.Status(rawValue: status) ?? .rejected,
                                                 reason: reason.flatMap(EventOutcome.Reason.init(rawValue:))))
    }

    /// The ledger rows of `keys`, each a session's event id, by primary key.
    static func lookup(_ keys: [EventKey], topology: EventTopology) -> PostgresQuery {
        let sessions = keys.map(\.sessionID)
        return """
            SELECT i.event_id::text, i.session_id, i.type, i.ad_id, i.status, i.reason
            FROM unnest(\(PostgresBinaryArray.text(sessions))::text[], \(IdentityColumns.uuids(keys.map(\.eventID)))::uuid[]) AS u(s, e)
            JOIN event_ids i ON i.session_id = u.s AND i.event_id = u.e
            WHERE \(topology.sessionFilter(sessions, column: "i.session_id"))
            """
    }

    /// The entries of a `lookup` result, by key.
    static func entries(_ result: PostgresResult) throws -> [EventKey: LedgerEntry] {
        var entries: [EventKey: LedgerEntry] = [:]
        for row in result.rows {
            let entry = try Self.entry(row)
            entries[EventKey(sessionID: entry.sessionID, eventID: entry.eventID)] = entry
        }
        return entries
    }

    /// Records fresh ids with their outcomes as array parameters (PostgreSQL): `events` in key
    /// order, so that two transactions never wait on each other's ids in opposite orders. The rows
    /// are inserted in the arrays' order, as `unnest` returns them: no `ORDER BY`, which sorted
    /// again (text under "C" collation, then uuid) what the caller sorted already. The order only
    /// spares a deadlock: were the executor ever to insert in another order, two such transactions
    /// could deadlock, one would be rolled back and run again (`mayRunAgain`), and nothing would be
    /// counted twice or lost.
    static func record(_ events: [StoredEvent], columns: IdentityColumns, receivedAt: Timestamp) -> PostgresQuery {
        """
        INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at, status, reason)
        SELECT e, s, t, a, \(receivedAt), st, r
        FROM unnest(\(columns.eventIDs)::uuid[], \(columns.sessionIDs)::text[], \(columns.types)::text[], \(columns.adIDs)::text[],
                    \(PostgresBinaryArray.text(events.map(\.outcome.status.rawValue)))::text[],
                    \(PostgresBinaryArray.text(events.map(\.outcome.reason?.rawValue)))::text[]) AS u(e, s, t, a, st, r)
        """
    }

    /// `record` on the node of the one shard of the transaction's sessions (`EventStore.RowForm.onShardNode`):
    /// the rows as one `VALUES` list, in the events' (key) order, sent unnamed.
    static func list(_ events: ArraySlice<StoredEvent>, receivedAt: Timestamp) -> PostgresQuery {
        let rows = events.map { stored -> PostgresQuery in
            let event = stored.event
            return """
                (\(event.eventID), \(event.sessionID), \(event.type.rawValue), \(event.adID), \(receivedAt),
                 \(stored.outcome.status.rawValue), \(stored.outcome.reason?.rawValue))
                """
        }
        let query: PostgresQuery = """
            INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at, status, reason)
            VALUES \(rows.joined(separator: ", "))
            """
        return query.sentUnnamed
    }

    /// Whether `error` is the insert of `record` finding an id taken by a concurrent transaction.
    /// On Citus the insert is routed to the ledger's shards, and a shard's violation comes back as
    /// an internal error (SQLSTATE XX000) without the constraint field, naming the shard's index
    /// (`event_ids_pkey_102464`): that is the same race.
    /// On a Citus node that holds the session's shard itself (AdTally writing through a worker, the
    /// store's call run there), the violation is raised by the shard's own index: a unique
    /// violation whose constraint field is that name.
    static func isEventIDTaken(_ error: any Error) -> Bool {
        guard let error = error as? PostgresError else { return false }
        if error.isUniqueViolation, let constraint = error.constraint {
            return constraint == "event_ids_pkey" || namesLedgerShardKey("\"\(constraint)\"")
        }
        return (error.isUniqueViolation || error.sqlState == citusRelayedError) && namesLedgerShardKey(error.message)
    }

    /// The SQLSTATE Citus relays a shard's unique violation with (internal_error).
    static let citusRelayedError = "XX000"

    /// Whether `message` quotes the name of a shard of the ledger's primary key, `"event_ids_pkey_<shard id>"`.
    static func namesLedgerShardKey(_ message: String) -> Bool {
        let prefix = "\"event_ids_pkey_"
        guard let start = message.range(of: prefix) else { return false }
        let rest = message[start.upperBound...]
        let digits = rest.prefix { $0.isASCII && $0.isNumber }
        return !digits.isEmpty && rest.dropFirst(digits.count).first == "\""
    }
}

/// A fresh event and the outcome it is stored with (rule 5), as the inserts of `events` and of the
/// ledger take them.
struct StoredEvent {
    let event: EventInput
    let outcome: EventOutcome

    /// The ledger's key order, `(session_id COLLATE "C", event_id)`: bytes of the session, then of
    /// the canonical (lowercase) UUID text, whose order is the UUID's.
    /// Whether `events[i]` comes before `events[j]`; read in place (a copy of an event per
    /// comparison, every string retained and released, was most of the sort's cost).
    static func keyOrder(_ events: UnsafeBufferPointer<EventInput>, _ i: Int, _ j: Int) -> Bool {
        if events[i].sessionID != events[j].sessionID {
            return events[i].sessionID.utf8Precedes(events[j].sessionID)
        }
        return events[i].eventID.utf8Precedes(events[j].eventID)
    }
}

/// The identity columns of a list of stored events as array parameters, encoded once and shared
/// by the two inserts that take the same events in the same order (PostgreSQL's form).
struct IdentityColumns {
    let eventIDs: any PostgresBindable
    let sessionIDs: PostgresBinaryArray
    let types: PostgresBinaryArray
    let adIDs: PostgresBinaryArray

    init(_ events: some Collection<StoredEvent>) {
        eventIDs = Self.uuids(events.map(\.event.eventID))
        sessionIDs = .text(events.map(\.event.sessionID))
        types = .text(events.map(\.event.type.rawValue))
        adIDs = .text(events.map(\.event.adID))
    }

    /// Event ids as a `uuid[]` parameter: binary, or text if one is not a UUID (the input layer
    /// only lets canonical ones through, so that fallback is for safety, not for use).
    static func uuids(_ ids: [String?]) -> any PostgresBindable {
        PostgresBinaryArray.uuid(ids) ?? PostgresArray(ids)
    }
}

/// An event's identity for rule 2: its id within its session (API 1.3).
struct EventKey: Hashable {
    let sessionID: String
    let eventID: String

    init(sessionID: String, eventID: String) {
        self.sessionID = sessionID
        self.eventID = eventID
    }

    init(_ event: EventInput) {
        self.init(sessionID: event.sessionID, eventID: event.eventID)
    }
}
