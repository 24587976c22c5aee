import Postgres

/// The report queries (API.md section 3). A report equals the count of the stored events it
/// covers, as if read from raw rows, for every `from` and `to`: whole UTC days and hours come from
/// the rollups (`ad_daily_counts`, `ad_hourly_counts`, exact per hour, folded by `Rollups`), and
/// only the rest of the range from raw events (`ReportSpans`), so a report's cost follows the hours
/// it spans, not the events in them. Every count is one of `CountColumn`'s, summed the same way
/// from every source.
public struct ReportStore: Sendable {
    /// Rows fetched from the listing's cursor per round trip (and written as one chunk).
    public let fetchSize: Int

    public init(fetchSize: Int = 1_000) {
        self.fetchSize = max(1, fetchSize)
    }

    /// The single-ad report: its advertiser, the six counts, and rejections and duplicates per reason.
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

    /// Counts for one ad in `[from, to)`, given how far the rollups reach (`state`, read before);
    /// zeros when it has no events there.
    public func adReport(adID: String, from: Timestamp?, to: Timestamp?, state: LifecycleState,
                         on connection: PostgresConnection) throws -> AdReport {
        let spans = ReportSpans(from: from, to: to, rolledUpTo: state.rolledUpTo, daysRolledUpTo: state.daysRolledUpTo, useDays: true)
        // Key access only: a report reads ranges of keys, and a plan made from a partition's stale
        // statistics (today's, which fills during the day) must not scan the whole partition. A
        // plan that a migration made stale loses the transaction: it runs once more.
        var attempt = 0
        var results: [PostgresResult]
        while true {
            attempt += 1
            do {
                results = try connection.pipeline([
                    PostgresStatement("BEGIN READ ONLY"), CountingState.keyAccessOnly,
                    PostgresStatement(Self.adReportSQL, [adID] + spans.parameters), PostgresStatement("COMMIT"),
                ])
                break
            } catch let error as PostgresError {
                if connection.isInTransaction { _ = try? connection.execute("ROLLBACK") }
                guard error.isTransientTransactionFailure && attempt < 2 else { throw error }
            }
        }
        guard let row = results[2].first else {
            // An aggregate without GROUP BY always returns exactly one row.
            throw PostgresError(kind: .typeMismatch, message: "report query returned no row")
        }
        var columns = row.columns()
        let advertiserID = try columns.next(String?.self)
        let counts = try CountValues(&columns)
        return AdReport(adID: adID, advertiserID: advertiserID, counts: counts.totals,
                        rejections: Self.rejectionReasons.map { reason in CountColumn.allCases.first { $0.reason == reason }.map { counts[$0] } ?? 0 },
                        duplicates: Self.duplicateReasons.map { reason in CountColumn.allCases.first { $0.reason == reason }.map { counts[$0] } ?? 0 })
    }

    /// The single-ad report: one row, the advertiser then every `CountColumn`, summed over the
    /// five spans ($1 the ad, $2-$7 the spans' bounds), each a range scan of a primary key or of
    /// `events_ad_received_idx`.
    static let adReportSQL = """
        SELECT (SELECT a.advertiser_id FROM ads a WHERE a.ad_id = $1),
        \(CountColumn.sums)
        FROM (
            SELECT \(CountColumn.rollupColumns) FROM ad_daily_counts x WHERE x.ad_id = $1 AND x.day >= $4 AND x.day < $5
            UNION ALL
            SELECT \(CountColumn.rollupColumns) FROM ad_hourly_counts x WHERE x.ad_id = $1 AND x.hour >= $3 AND x.hour < $4
            UNION ALL
            SELECT \(CountColumn.rollupColumns) FROM ad_hourly_counts x WHERE x.ad_id = $1 AND x.hour >= $5 AND x.hour < $6
            UNION ALL
            SELECT \(CountColumn.rawCounts) FROM events e WHERE e.ad_id = $1 AND e.received_at >= $2 AND e.received_at < $3
            UNION ALL
            SELECT \(CountColumn.rawCounts) FROM events e WHERE e.ad_id = $1 AND e.received_at >= $6 AND e.received_at < $7
        ) r
        """

    /// Streams the listing's rows, sorted by `ad_id` in byte order then `bucket_start`, in batches
    /// of `fetchSize` from a server-side cursor, inside one read-only repeatable-read transaction
    /// (every batch sees the same snapshot). `body` gets each batch and may throw to stop early
    /// (the client left); memory holds one batch at a time.
    ///
    /// A transaction lost before the first batch was handed on (a plan that a migration made stale)
    /// is run once more; after that, the rows already sent cannot be taken back, and the error ends
    /// the stream.
    public func listing(_ query: ReportQuery, state: LifecycleState, on connection: PostgresConnection,
                        _ body: ([Row]) throws -> Void) throws {
        var parameters: [any PostgresBindable] = []
        let sql = Self.listingSQL(query, state: state, parameters: &parameters)
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
            try connection.query(CountingState.keyAccessOnly.sql)
            try connection.query("DECLARE report_rows NO SCROLL CURSOR FOR \(sql)", parameters)
            while true {
                let result = try connection.query("FETCH FORWARD \(fetchSize) FROM report_rows")
                var rows: [Row] = []
                rows.reserveCapacity(result.rowCount)
                for row in result.rows {
                    var columns = row.columns()
                    rows.append(Row(adID: try columns.next(), advertiserID: try columns.next(),
                                    bucketStart: try columns.next(Int64?.self).map(Timestamp.init(microsecondsSinceEpoch:)),
                                    counts: try CountValues(&columns).totals))
                }
                if !rows.isEmpty { try body(rows) }
                if result.rowCount < fetchSize { break }
            }
            try connection.execute("CLOSE report_rows")
        }
    }

    /// The listing's SQL text and its bound parameters: every `CountColumn` per ad and bucket,
    /// summed over the five spans of `ReportSpans` ($1-$6), for every ad or one advertiser's ($7).
    /// Only clauses are chosen here, from fixed text by the granularity and the filter; every value
    /// is a parameter.
    static func listingSQL(_ query: ReportQuery, state: LifecycleState, parameters: inout [any PostgresBindable]) -> String {
        let spans = ReportSpans(from: query.from, to: query.to, rolledUpTo: state.rolledUpTo, daysRolledUpTo: state.daysRolledUpTo,
                                useDays: query.granularity != .hour)
        parameters.append(contentsOf: spans.parameters)
        // date_bin is plain arithmetic on the stored instant (cheaper per event than date_trunc with a
        // time zone); from a UTC midnight origin its buckets are UTC days and hours.
        func bucket(_ column: String) -> String {
            switch query.granularity {
            case .total: return "NULL::timestamptz"
            case .day: return "date_bin('1 day', \(column), timestamptz '2000-01-01T00:00:00Z')"
            case .hour: return "date_bin('1 hour', \(column), timestamptz '2000-01-01T00:00:00Z')"
            }
        }
        // One advertiser: walk its ads from ads_advertiser_idx into each source's key.
        let only: String
        if let advertiserID = query.advertiserID {
            parameters.append(advertiserID)
            only = " AND x.ad_id IN (SELECT f.ad_id FROM ads f WHERE f.advertiser_id = $7)"
        } else {
            only = ""
        }
        let onlyRaw = only.replacingOccurrences(of: "x.ad_id", with: "e.ad_id")
        return """
            SELECT r.ad_id, a.advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
            \(CountColumn.sums)
            FROM (
                SELECT x.ad_id, \(bucket("x.day")) AS bucket, \(CountColumn.rollupColumns)
                FROM ad_daily_counts x WHERE x.day >= $3 AND x.day < $4\(only)
                UNION ALL
                SELECT x.ad_id, \(bucket("x.hour")) AS bucket, \(CountColumn.rollupColumns)
                FROM ad_hourly_counts x WHERE x.hour >= $2 AND x.hour < $3\(only)
                UNION ALL
                SELECT x.ad_id, \(bucket("x.hour")) AS bucket, \(CountColumn.rollupColumns)
                FROM ad_hourly_counts x WHERE x.hour >= $4 AND x.hour < $5\(only)
                UNION ALL
                SELECT e.ad_id, \(bucket("e.received_at")) AS bucket, \(CountColumn.rawCounts)
                FROM events e WHERE e.received_at >= $1 AND e.received_at < $2\(onlyRaw) GROUP BY 1, 2
                UNION ALL
                SELECT e.ad_id, \(bucket("e.received_at")) AS bucket, \(CountColumn.rawCounts)
                FROM events e WHERE e.received_at >= $5 AND e.received_at < $6\(onlyRaw) GROUP BY 1, 2
            ) r
            LEFT JOIN ads a ON a.ad_id = r.ad_id
            GROUP BY r.ad_id, a.advertiser_id, r.bucket
            ORDER BY r.ad_id COLLATE "C", r.bucket
            """
    }
}
