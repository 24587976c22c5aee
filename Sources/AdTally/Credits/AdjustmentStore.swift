import Contract
import Postgres
import Timestamps

/// Credits (API.md section 10): makes an adjustment, reads one back, and lists the credits issued
/// in a range. Migration 0014 has the tables.
///
/// An adjustment is one transaction, so it is all or nothing: under an advisory lock that
/// serialises adjustments (and that an erasure takes shared, `creditLockKey`), it
/// marks the matched accepted events hour by hour of `[from, to)` (`credit_marks`, one mark an
/// event: a mark that exists already is left as it is, so no event is credited twice), each step
/// one statement under the maintenance statement limit; then it stamps `created_at` with the
/// database's clock under the watermark lock, as an event batch does (so `final_before` never
/// passes an adjustment still committing, and is held back only for that last moment), and records
/// the adjustment and its per-ad totals. Event ingestion never waits for it: it reads raw rows and
/// writes only its own tables.
public struct AdjustmentStore: Sendable {
    /// The bound on each step (`ADTALLY_MAINTENANCE_STATEMENT_TIMEOUT_SECONDS`).
    public var limit: StatementLimit
    /// The span of events one step marks.
    public var stepMicroseconds: Int64 = 3_600 * Timestamp.microsecondsPerSecond

    public init(limit: StatementLimit) {
        self.limit = limit
    }

    /// The key of the advisory lock that an adjustment holds exclusively while it marks events and
    /// an erasure holds shared while it re-keys them (`ErasureStore`): a mark is never made for an
    /// event whose session is being erased (it would name the session after the erasure).
    static let creditLockKey: Int64 = 0x4144_4A55_5354_4D54

    /// An adjustment as recorded: what `POST` and `GET /v1/adjustments/{id}` answer.
    public struct Adjustment: Sendable, Equatable {
        public struct Ad: Sendable, Equatable {
            public var adID: String
            public var advertiserID: String
            public var impressions: Int64
            public var clicks: Int64
        }

        public var adjustmentID: String
        public var reason: String
        public var note: String?
        public var createdAt: Timestamp
        public var from: Timestamp
        public var to: Timestamp
        public var impressions: Int64
        public var clicks: Int64
        /// Sorted by ad id (byte order); ads with nothing credited left out.
        public var ads: [Ad]
    }

    /// What `make` did.
    public enum Outcome: Sendable, Equatable {
        /// Made now (`201`).
        case created(Adjustment)
        /// The same request was made before (`200` with the first answer).
        case repeated(Adjustment)
        /// The id names an adjustment with another request (`409 adjustment_conflict`).
        case conflict
    }



    /// Makes `request`'s adjustment. `horizon`: the raw-event retention horizon now (`from` must not
    /// be before it). Throws `AdjustmentRequest.Invalid` for a rule that needs the database.
    public func make(_ request: AdjustmentRequest, horizon: Timestamp, on connection: PostgresConnection) throws -> Outcome {
        try connection.withTransaction(retry: .transientFailures(attempts: 3)) { transaction in
            _ = try transaction.query(limit.forTransaction)
            // On Citus: one connection per node for the whole transaction, which the reference
            // tables written at its end (one has a foreign key to the other) need after the marks'
            // inserts on every shard. A setting PostgreSQL alone keeps as an unused placeholder.
            _ = try transaction.query("SELECT set_config('citus.multi_shard_modify_mode', 'sequential', true)")
            _ = try transaction.query("SELECT pg_advisory_xact_lock(\(Self.creditLockKey))")
            if let stored = try storedRequest(request.adjustmentID, in: transaction) {
                guard stored == request.canonical else { return .conflict }
                guard let earlier = try read(request.adjustmentID, in: transaction) else {
                    throw PostgresError(kind: .statementFailed, message: "adjustment \(request.adjustmentID) vanished under the lock")
                }
                return .repeated(earlier)
            }
            guard request.from >= horizon else {
                throw AdjustmentRequest.Invalid(field: "from", message: "from lies before the raw-event retention horizon \(horizon.rfc3339): only raw rows kept can be credited.")
            }
            let finalBefore = try transaction.query("SELECT adtally_final_before()").first?.decode(Timestamp.self, at: 0)
            guard let finalBefore, request.to <= finalBefore else {
                throw AdjustmentRequest.Invalid(field: "to", message: "to must be at or before final_before (\(finalBefore?.rfc3339 ?? "unknown")): only events that can no longer change are credited.")
            }
            var totals: [String: (impressions: Int64, clicks: Int64)] = [:]
            var lower = request.from
            while lower < request.to {
                let next = (lower.microsecondsSinceEpoch / stepMicroseconds + 1) * stepMicroseconds
                let upper = Timestamp(microsecondsSinceEpoch: min(next, request.to.microsecondsSinceEpoch))
                for row in try transaction.query(mark(request, from: lower, to: upper)).rows {
                    let adID = try row.decode(String.self, at: 0)
                    let impressions = try row.decode(Int64.self, at: 1), clicks = try row.decode(Int64.self, at: 2)
                    totals[adID, default: (0, 0)].impressions += impressions
                    totals[adID, default: (0, 0)].clicks += clicks
                }
                lower = upper
            }
            var advertisers: [String: String] = [:]
            let adIDs = totals.keys.sorted { $0.utf8Precedes($1) }
            if !adIDs.isEmpty {
                for row in try transaction.query("SELECT ad_id, advertiser_id FROM ads WHERE ad_id = ANY (\(PostgresBinaryArray.text(adIDs))::text[])").rows {
                    advertisers[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1)
                }
            }
            // The watermark lock, as a batch of events takes it: created_at is the database's clock
            // read under it, so final_before cannot pass this adjustment before it commits.
            guard let createdAt = try transaction.query("SELECT adtally_begin_batch(NULL)").first?.decode(Timestamp.self, at: 0) else {
                throw PostgresError(kind: .statementFailed, message: "adtally_begin_batch returned no instant")
            }
            let ads = adIDs.map { adID in
                Adjustment.Ad(adID: adID, advertiserID: advertisers[adID] ?? "", impressions: totals[adID]?.impressions ?? 0,
                              clicks: totals[adID]?.clicks ?? 0)
            }
            let adjustment = Adjustment(adjustmentID: request.adjustmentID, reason: request.reason.rawValue, note: request.note,
                                        createdAt: createdAt, from: request.from, to: request.to,
                                        impressions: ads.reduce(0) { $0 + $1.impressions }, clicks: ads.reduce(0) { $0 + $1.clicks }, ads: ads)
            try transaction.query("""
                INSERT INTO adjustments (adjustment_id, reason, note, request, created_at, events_from, events_to,
                                         credited_impressions, credited_clicks)
                VALUES (\(adjustment.adjustmentID), \(adjustment.reason), \(adjustment.note), \(request.canonical), \(createdAt),
                        \(adjustment.from), \(adjustment.to), \(adjustment.impressions), \(adjustment.clicks))
                """)
            if !ads.isEmpty {
                try transaction.query("""
                    INSERT INTO adjustment_ads (adjustment_id, ad_id, advertiser_id, credited_impressions, credited_clicks)
                    SELECT \(adjustment.adjustmentID), u.a, u.v, u.i, u.c
                    FROM unnest(\(PostgresBinaryArray.text(ads.map(\.adID)))::text[], \(PostgresBinaryArray.text(ads.map(\.advertiserID)))::text[],
                                \(PostgresBinaryArray.int8(ads.map { Optional($0.impressions) }))::bigint[], \(PostgresBinaryArray.int8(ads.map { Optional($0.clicks) }))::bigint[])
                         AS u(a, v, i, c)
                    """)
            }
            return .created(adjustment)
        }
    }

    /// One step: marks the matched accepted events received in `[from, to)` that no adjustment
    /// credited yet, and returns per ad how many impressions and clicks it marked.
    func mark(_ request: AdjustmentRequest, from: Timestamp, to: Timestamp) -> PostgresQuery {
        var filters: PostgresQuery = ""
        if let sessions = request.sessionIDs {
            filters = "\(filters) AND e.session_id = ANY (\(PostgresBinaryArray.text(sessions))::text[])"
        }
        if let ads = request.adIDs {
            filters = "\(filters) AND e.ad_id = ANY (\(PostgresBinaryArray.text(ads))::text[])"
        }
        if let advertiser = request.advertiserID {
            filters = "\(filters) AND e.ad_id IN (SELECT a.ad_id FROM ads a WHERE a.advertiser_id = \(advertiser))"
        }
        return """
            WITH marked AS (
                INSERT INTO credit_marks (session_id, event_id, adjustment_id, ad_id, type, received_at)
                SELECT e.session_id, e.event_id, \(request.adjustmentID), e.ad_id, e.type, e.received_at
                FROM events e
                WHERE e.received_at >= \(from) AND e.received_at < \(to) AND e.status = 'accepted' \(filters)
                ORDER BY e.session_id, e.event_id
                ON CONFLICT (session_id, event_id) DO NOTHING
                RETURNING ad_id, type
            )
            SELECT ad_id, count(*) FILTER (WHERE type = 'impression'), count(*) FILTER (WHERE type = 'click')
            FROM marked GROUP BY ad_id
            """
    }

    private func storedRequest(_ adjustmentID: String, in transaction: PostgresTransaction) throws -> String? {
        try transaction.query("SELECT request FROM adjustments WHERE adjustment_id = \(adjustmentID)").first?.decode(String.self, at: 0)
    }

    /// The adjustment `adjustmentID` as recorded; nil when there is none.
    public func read(_ adjustmentID: String, on connection: PostgresConnection) throws -> Adjustment? {
        try connection.withTransaction(TransactionOptions(isolation: .repeatableRead, readOnly: true)) { transaction in
            try read(adjustmentID, in: transaction)
        }
    }

    private func read(_ adjustmentID: String, in transaction: PostgresTransaction) throws -> Adjustment? {
        guard let row = try transaction.query("""
            SELECT reason, note, created_at, events_from, events_to, credited_impressions, credited_clicks
            FROM adjustments WHERE adjustment_id = \(adjustmentID)
            """).first else { return nil }
        var adjustment = Adjustment(adjustmentID: adjustmentID, reason: try row.decode(String.self, at: 0), note: try row.decode(String?.self, at: 1),
                                    createdAt: try row.decode(Timestamp.self, at: 2), from: try row.decode(Timestamp.self, at: 3),
                                    to: try row.decode(Timestamp.self, at: 4), impressions: try row.decode(Int64.self, at: 5),
                                    clicks: try row.decode(Int64.self, at: 6), ads: [])
        for ad in try transaction.query("""
            SELECT ad_id, advertiser_id, credited_impressions, credited_clicks FROM adjustment_ads
            WHERE adjustment_id = \(adjustmentID) ORDER BY ad_id
            """).rows {
            adjustment.ads.append(Adjustment.Ad(adID: try ad.decode(String.self, at: 0), advertiserID: try ad.decode(String.self, at: 1),
                                                impressions: try ad.decode(Int64.self, at: 2), clicks: try ad.decode(Int64.self, at: 3)))
        }
        return adjustment
    }

    /// One row of the credits report: an adjustment's credits for one ad.
    public struct CreditRow: Sendable, Equatable {
        public var adjustmentID: String
        public var reason: String
        public var createdAt: Timestamp
        public var adID: String
        public var advertiserID: String
        public var eventsFrom: Timestamp
        public var eventsTo: Timestamp
        public var impressions: Int64
        public var clicks: Int64
    }

    /// The credits issued in `[from, to)` (by `created_at`; nil bounds are open), of one advertiser
    /// when given, sorted by `created_at`, adjustment id, ad id. `scope` restricts an advertiser's
    /// key to the rows of its own ads (of an adjustment over several advertisers, only its ads'
    /// rows); `advertiserID` must then be absent or its own (`ReportScope.Forbidden` otherwise).
    public func credits(from: Timestamp?, to: Timestamp?, advertiserID: String?, scope: ReportScope,
                        on connection: PostgresConnection) throws -> [CreditRow] {
        let advertiserID = try scope.listingAdvertiser(advertiserID)
        var filters: PostgresQuery = ""
        if let from { filters = "\(filters) AND a.created_at >= \(from)" }
        if let to { filters = "\(filters) AND a.created_at < \(to)" }
        if let advertiserID { filters = "\(filters) AND d.advertiser_id = \(advertiserID)" }
        let query: PostgresQuery = """
            SELECT a.adjustment_id, a.reason, a.created_at, d.ad_id, d.advertiser_id, a.events_from, a.events_to,
                   d.credited_impressions, d.credited_clicks
            FROM adjustments a JOIN adjustment_ads d ON d.adjustment_id = a.adjustment_id
            WHERE true \(filters)
            ORDER BY a.created_at, a.adjustment_id, d.ad_id
            """
        return try connection.query(query).rows.map { row in
            CreditRow(adjustmentID: try row.decode(String.self, at: 0), reason: try row.decode(String.self, at: 1),
                      createdAt: try row.decode(Timestamp.self, at: 2), adID: try row.decode(String.self, at: 3),
                      advertiserID: try row.decode(String.self, at: 4), eventsFrom: try row.decode(Timestamp.self, at: 5),
                      eventsTo: try row.decode(Timestamp.self, at: 6), impressions: try row.decode(Int64.self, at: 7),
                      clicks: try row.decode(Int64.self, at: 8))
        }
    }
}
