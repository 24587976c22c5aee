import Postgres
import Timestamps

/// The events behind a count (API.md section 11): every stored raw event of one ad with
/// `received_at` in `[from, to)`, in `received_at` then `event_id` order, with the adjustment that
/// credited it, streamed from a server-side cursor in batches as the listing is
/// (`ReportStore.listing`), so memory holds one batch whatever the range.
///
/// The rows are read in one read-only repeatable-read snapshot taken after the caller read
/// `final_before`, so every event received before that instant is in the export (ARCHITECTURE.md,
/// "Why a folded quarter is exact", step 3), and its lines count exactly what a report of the same
/// range counts from raw rows. An erased session's events are anonymous rows (migration 0014):
/// they are exported with `event_id`, `session_id`, `snapshot_id` and `position` null.
public struct EventExportStore: Sendable {
    /// Rows fetched from the cursor per round trip (and written as one chunk).
    public let fetchSize: Int

    /// `fetchSize` rows a round trip (at least 1): a batch of 1,000 lines is a few hundred KB of NDJSON.
    public init(fetchSize: Int = 1_000) {
        self.fetchSize = max(1, fetchSize)
    }

    /// The session key of an erased session's anonymous rows begins with this character, which no
    /// identifier can hold (`adtally_anonymous_session`, migration 0014).
    static let anonymousSessionPrefix: Character = "#"

    /// One exported event, members in the contract's order.
    public struct Row: Sendable, Equatable {
        /// nil for an erased session's event (the stored id is a random key that names nothing).
        public var eventID: String?
        /// `impression` or `click`.
        public var type: String
        /// nil for an erased session's event, and in an advertiser's export (`sessionRef` instead).
        public var sessionID: String?
        /// In an advertiser's export, the session's `session_ref` (nil for an erased session's
        /// event); nil in a publisher's.
        public var sessionRef: String?
        /// The client's clock, as the event said.
        public var occurredAt: Timestamp
        /// The server's clock when the event was stored: what the reports count by.
        public var receivedAt: Timestamp
        /// `accepted`, `duplicate` or `rejected`.
        public var status: String
        /// nil for an accepted event.
        public var reason: String?
        /// The snapshot the event named; nil when it named none, or for an erased session's event.
        public var snapshotID: String?
        /// The row the event named; nil when it named none, or for an erased session's event.
        public var position: Int64?
        /// The `adjustment_id` of the credit that covers the event, if any.
        public var creditedBy: String?

        /// A row as stored; an anonymous row (its session key begins with `#`) loses what could
        /// name the session, whatever it holds.
        init(eventID: String, type: String, sessionID: String, occurredAt: Timestamp, receivedAt: Timestamp, status: String,
             reason: String?, snapshotID: String?, position: Int64?, creditedBy: String?) {
            let anonymous = sessionID.first == EventExportStore.anonymousSessionPrefix
            self.eventID = anonymous ? nil : eventID
            self.type = type
            self.sessionID = anonymous ? nil : sessionID
            self.occurredAt = occurredAt
            self.receivedAt = receivedAt
            self.status = status
            self.reason = reason
            self.snapshotID = anonymous ? nil : snapshotID
            self.position = anonymous ? nil : position
            self.creditedBy = creditedBy
        }

        /// The row as an advertiser sees it: its session named by `session_ref`, no snapshot id.
        func forAdvertiser(_ advertiserID: String, _ refs: SessionRefs.Keyed) -> Row {
            var row = self
            row.sessionRef = sessionID.map { refs.ref(advertiserID: advertiserID, sessionID: $0) }
            row.sessionID = nil
            row.snapshotID = nil
            return row
        }
    }

    /// The export's statement: a range scan of `events_ad_received_idx` in every partition the
    /// range touches (already in `received_at` order; ties sorted by `event_id`), each row's
    /// credit mark found by its primary key. Every value is a bound parameter; the status filter
    /// is a clause chosen here. (The first column is not named `event_id`: an `ORDER BY` of a
    /// plain name sorts by an output column of that name, here text, before the table's uuid.)
    static func exportQuery(adID: String, scope: ReportScope, query: EventExportQuery) -> PostgresQuery {
        var status: PostgresQuery = ""
        if let only = query.status { status = " AND e.status = \(only.rawValue)" }
        if case .advertiser(let owner) = scope {
            // No row of an ad that is not the key's advertiser's. Tied to each row's ad, not a
            // one-time filter on the ad id: Citus on PostgreSQL 15 and 16 refuses a constant
            // condition in a query with an outer join ("pseudoconstant quals"). Each row's check
            // is one probe of ads' primary key, and the route has refused another's ad already.
            status = "\(status) AND EXISTS (SELECT 1 FROM ads o WHERE o.ad_id = e.ad_id AND o.advertiser_id = \(owner))"
        }
        return """
            SELECT e.event_id::text AS event_id_text, e.type, e.session_id, e.occurred_at, e.received_at, e.status, e.reason,
                   e.snapshot_id, e.position, m.adjustment_id
            FROM events e
            LEFT JOIN credit_marks m ON m.session_id = e.session_id AND m.event_id = e.event_id
            WHERE e.ad_id = \(adID) AND e.received_at >= \(query.from) AND e.received_at < \(query.to)\(status)
            ORDER BY e.received_at, e.event_id
            """
    }

    /// Streams the export's rows in batches of `fetchSize` from a cursor, inside one read-only
    /// repeatable-read transaction. `body` gets each batch and may throw to stop early (the client
    /// left, or the deadline passed); the error leaves here and the transaction rolls back.
    ///
    /// A transaction lost before the first batch was handed on (a plan that a migration made
    /// stale) is run once more; after that, the rows already sent cannot be taken back, and the
    /// error ends the stream.
    ///
    /// `scope` restricts an advertiser's key to its own ads (no row of another's), and gives each
    /// row as the advertiser sees it (`Row.forAdvertiser`): `refs` keys its `session_ref`s.
    public func export(adID: String, _ query: EventExportQuery, scope: ReportScope, refs: SessionRefs.Keyed?,
                       on connection: PostgresConnection, _ body: ([Row]) throws -> Void) throws {
        let advertiser: (id: String, refs: SessionRefs.Keyed)?
        switch (scope, refs) {
        case (.everyAdvertiser, _): advertiser = nil
        case (.advertiser(let id), let refs?): advertiser = (id, refs)
        case (.advertiser, nil):
            // The route keys the refs before it asks for an advertiser's export.
            throw PostgresError(kind: .statementFailed, message: "an advertiser's export needs the session_ref key")
        }
        try CursorStream.run(on: connection, fetchSize: fetchSize, prepare: { transaction in
            var opening = PostgresPipeline()
            // One ad's rows by key: no parallel workers, no scan of a whole partition.
            opening.add(ReportStore.serialPlans)
            opening.add(ReportStore.keyAccessOnly)
            // Rows in index order, so that they stream: each partition's index scan already
            // returns them by received_at, the partitions come in order, and only the rows
            // of one instant are sorted by event_id (an incremental sort of a few rows). A
            // bitmap scan would lose that order and sort the whole range before the first
            // row (on disk past work_mem), which PostgreSQL prefers for a range of a few
            // days of one ad (docs/REPORTS.md, "The events behind a count").
            opening.add("SET LOCAL enable_bitmapscan = off")
            _ = try transaction.run(opening)
            return (Self.exportQuery(adID: adID, scope: scope, query: query), { row in
                var columns = row.columns()
                let stored = Row(eventID: try columns.next(), type: try columns.next(), sessionID: try columns.next(),
                                 occurredAt: try columns.next(), receivedAt: try columns.next(), status: try columns.next(),
                                 reason: try columns.next(), snapshotID: try columns.next(), position: try columns.next(),
                                 creditedBy: try columns.next())
                guard let advertiser else { return stored }
                return stored.forAdvertiser(advertiser.id, advertiser.refs)
            })
        }, body)
    }
}
