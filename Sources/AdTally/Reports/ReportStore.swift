import Postgres

/// The report queries (API.md section 3). Counting is `count(*)` over `events` by `received_at`
/// every time, so a report always equals the raw count; speed comes from the indexes that lead with
/// the filtered columns (`events_ad_received_idx (ad_id, received_at) INCLUDE (type, status, reason)`
/// answers a single ad with an index-only range scan, and an advertiser's listing is a nested loop
/// from `ads_advertiser_idx` into it).
public struct ReportStore: Sendable {
    /// Rows fetched from the listing's cursor per round trip (and written as one chunk).
    public let fetchSize: Int

    public init(fetchSize: Int = 1_000) {
        self.fetchSize = max(1, fetchSize)
    }

    /// The single-ad report: its advertiser, the six counts, and rejections per reason.
    public struct AdReport: Sendable, Equatable {
        public var adID: String
        /// nil for an ad never seen in a snapshot.
        public var advertiserID: String?
        public var counts: ReportCounts
        /// Rejected events per reason, in `rejectionReasons` order.
        public var rejections: [Int64]
        /// Duplicate events per reason, in `duplicateReasons` order.
        public var duplicates: [Int64]
    }

    /// The five rejection reasons a single-ad report always lists, in the contract's order.
    public static let rejectionReasons: [EventOutcome.Reason] = [.adNotInFeed, .staleSnapshot, .positionMismatch, .notViewable, .adNotServed]
    /// The three duplicate reasons a single-ad report always lists, in the contract's order.
    public static let duplicateReasons: [EventOutcome.Reason] = [.impressionAlreadyCounted, .clickWithinWindow, .simultaneousClick]

    /// One row of a listing.
    public struct Row: Sendable, Equatable {
        public var adID: String
        public var advertiserID: String?
        /// Start of the UTC day or hour; nil for `granularity=total`.
        public var bucketStart: Timestamp?
        public var counts: ReportCounts
    }

    /// Counts for one ad in `[from, to)`; zeros when it has no events there.
    public func adReport(adID: String, from: Timestamp?, to: Timestamp?, on connection: PostgresConnection) throws -> AdReport {
        var parameters: [any PostgresBindable] = []
        let sql = Self.adReportSQL(adID: adID, from: from, to: to, parameters: &parameters)
        guard let row = try connection.query(sql, parameters).first else {
            // An aggregate without GROUP BY always returns exactly one row.
            throw PostgresError(kind: .typeMismatch, message: "report query returned no row")
        }
        let counts = try Self.counts(row, from: 1)
        let rejections = try (0..<Self.rejectionReasons.count).map { try row.decode(Int64.self, at: 7 + $0) }
        let duplicates = try (0..<Self.duplicateReasons.count).map { try row.decode(Int64.self, at: 7 + Self.rejectionReasons.count + $0) }
        return AdReport(adID: adID, advertiserID: try row.decode(String?.self, at: 0), counts: counts, rejections: rejections,
                        duplicates: duplicates)
    }

    /// The single-ad report's SQL and its bound parameters: one row, advertiser then counts then
    /// rejections per reason, from an index-only range scan of `events_ad_received_idx`.
    static func adReportSQL(adID: String, from: Timestamp?, to: Timestamp?, parameters: inout [any PostgresBindable]) -> String {
        parameters.append(adID)
        let range = rangeClause(from: from, to: to, parameters: &parameters)
        // The reason codes are this program's constants, never client input.
        let reasons = (rejectionReasons.map { reason in
            "count(*) FILTER (WHERE e.status = 'rejected' AND e.reason = '\(reason.rawValue)')"
        } + duplicateReasons.map { reason in
            "count(*) FILTER (WHERE e.status = 'duplicate' AND e.reason = '\(reason.rawValue)')"
        }).joined(separator: ",\n")
        return """
            SELECT (SELECT a.advertiser_id FROM ads a WHERE a.ad_id = $1),
            \(ReportCounts.selectList),
            \(reasons)
            FROM events e
            WHERE e.ad_id = $1\(range)
            """
    }

    /// Streams the listing's rows, sorted by `ad_id` in byte order then `bucket_start`, in batches
    /// of `fetchSize` from a server-side cursor, inside one read-only repeatable-read transaction
    /// (every batch sees the same snapshot). `body` gets each batch and may throw to stop early
    /// (the client left); memory holds one batch at a time.
    ///
    /// A transaction lost before the first batch was handed on (a plan that a migration made stale)
    /// is run once more; after that, the rows already sent cannot be taken back, and the error ends
    /// the stream.
    public func listing(_ query: ReportQuery, on connection: PostgresConnection, _ body: ([Row]) throws -> Void) throws {
        var parameters: [any PostgresBindable] = []
        let sql = Self.listingSQL(query, parameters: &parameters)
        var delivered = false
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try streamListing(sql, parameters, on: connection) { rows in
                    delivered = true
                    try body(rows)
                }
            } catch let error as PostgresError where error.isTransientTransactionFailure && !delivered && attempt < 2 {
                continue
            }
        }
    }

    private func streamListing(_ sql: String, _ parameters: [any PostgresBindable], on connection: PostgresConnection,
                               _ body: ([Row]) throws -> Void) throws {
        try connection.transaction(isolation: .repeatableRead) { connection in
            try connection.execute("SET TRANSACTION READ ONLY")
            // The whole result is read, so plan for all rows rather than a fast first row.
            try connection.execute("SET LOCAL cursor_tuple_fraction = 1.0")
            try connection.query("DECLARE report_rows NO SCROLL CURSOR FOR \(sql)", parameters)
            while true {
                let result = try connection.query("FETCH FORWARD \(fetchSize) FROM report_rows")
                var rows: [Row] = []
                rows.reserveCapacity(result.rowCount)
                for row in result.rows {
                    rows.append(Row(adID: try row.decode(String.self, at: 0), advertiserID: try row.decode(String?.self, at: 1),
                                    bucketStart: try row.decode(Int64?.self, at: 2).map(Timestamp.init(microsecondsSinceEpoch:)),
                                    counts: try Self.counts(row, from: 3)))
                }
                if !rows.isEmpty { try body(rows) }
                if result.rowCount < fetchSize { break }
            }
            try connection.execute("CLOSE report_rows")
        }
    }

    /// The listing's SQL text and its bound parameters. Only clauses are chosen here; every value
    /// is a parameter.
    static func listingSQL(_ query: ReportQuery, parameters: inout [any PostgresBindable]) -> String {
        // date_bin is plain arithmetic on the stored instant (cheaper per event than date_trunc with a
        // time zone); from a UTC midnight origin its buckets are UTC days and hours. The bucket becomes
        // epoch microseconds only on the aggregated rows.
        // `bucket` and `range` are SQL fragments chosen from fixed text by the granularity and by
        // which bounds are present; the bound values themselves are appended to `parameters` ($N).
        let bucket: String
        switch query.granularity {
        case .total: bucket = "NULL::timestamptz"
        case .day: bucket = "date_bin('1 day', e.received_at, timestamptz '2000-01-01T00:00:00Z')"
        case .hour: bucket = "date_bin('1 hour', e.received_at, timestamptz '2000-01-01T00:00:00Z')"
        }
        let inner: String
        if let advertiserID = query.advertiserID {
            // Few ads per advertiser: walk them from ads_advertiser_idx, each a range scan of
            // events_ad_received_idx.
            parameters.append(advertiserID)
            let range = rangeClause(from: query.from, to: query.to, parameters: &parameters)
            inner = """
                SELECT a.ad_id, a.advertiser_id, \(bucket) AS bucket,
                \(ReportCounts.selectList)
                FROM ads a JOIN events e ON e.ad_id = a.ad_id
                WHERE a.advertiser_id = $1\(range)
                GROUP BY a.ad_id, a.advertiser_id, bucket
                """
        } else {
            let range = rangeClause(from: query.from, to: query.to, parameters: &parameters)
            // Aggregate first, then name the advertiser: one ads lookup per row, not per event.
            inner = """
                SELECT g.ad_id, a.advertiser_id, g.bucket, g.c1, g.c2, g.c3, g.c4, g.c5, g.c6
                FROM (
                    SELECT e.ad_id, \(bucket) AS bucket,
                    \(ReportCounts.selectList)
                    FROM events e
                    \(range.isEmpty ? "" : "WHERE TRUE\(range)")
                    GROUP BY e.ad_id, bucket
                ) g
                LEFT JOIN ads a ON a.ad_id = g.ad_id
                """
        }
        return """
            SELECT r.ad_id, r.advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
                   r.c1, r.c2, r.c3, r.c4, r.c5, r.c6
            FROM (\(inner)) r
            ORDER BY r.ad_id COLLATE "C", r.bucket
            """
    }

    /// ` AND e.received_at >= $n AND e.received_at < $m` for the bounds given, appending them.
    static func rangeClause(from: Timestamp?, to: Timestamp?, parameters: inout [any PostgresBindable]) -> String {
        var clause = ""
        if let from {
            parameters.append(from)
            clause += " AND e.received_at >= $\(parameters.count)::timestamptz"
        }
        if let to {
            parameters.append(to)
            clause += " AND e.received_at < $\(parameters.count)::timestamptz"
        }
        return clause
    }

    static func counts(_ row: PostgresRow, from column: Int) throws -> ReportCounts {
        ReportCounts(impressions: try row.decode(Int64.self, at: column), clicks: try row.decode(Int64.self, at: column + 1),
                     duplicateImpressions: try row.decode(Int64.self, at: column + 2),
                     rejectedImpressions: try row.decode(Int64.self, at: column + 3),
                     duplicateClicks: try row.decode(Int64.self, at: column + 4),
                     rejectedClicks: try row.decode(Int64.self, at: column + 5))
    }
}
