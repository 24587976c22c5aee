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
                    PostgresStatement("BEGIN READ ONLY"), CountingState.keyAccessOnly, Self.serialPlans,
                    PostgresStatement(Self.adReportSQL, [adID] + spans.parameters), PostgresStatement("COMMIT"),
                ])
                break
            } catch let error as PostgresError {
                if connection.isInTransaction { _ = try? connection.execute("ROLLBACK") }
                guard error.isTransientTransactionFailure && attempt < 2 else { throw error }
            }
        }
        guard let row = results[3].first else {
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

    /// No parallel workers for the rest of the transaction: a report of one ad or one advertiser
    /// reads hundreds to thousands of index entries, and a parallel plan (which PostgreSQL picks for
    /// the regrouping of an advertiser's listing with microsecond bounds) spends more starting its
    /// workers and merging their results than it saves, on a small machine most of all.
    static let serialPlans = PostgresStatement("SET LOCAL max_parallel_workers_per_gather = 0")

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
                return try streamListing(sql, parameters, serial: query.advertiserID != nil, on: connection) { rows in
                    delivered = true
                    try body(rows)
                }
            } catch let error as PostgresError where error.isTransientTransactionFailure && !delivered && attempt < 2 {
                continue
            }
        }
    }

    private func streamListing(_ sql: String, _ parameters: [any PostgresBindable], serial: Bool, on connection: PostgresConnection,
                               _ body: ([Row]) throws -> Void) throws {
        try connection.transaction(isolation: .repeatableRead) { connection in
            try connection.execute("SET TRANSACTION READ ONLY")
            // The whole result is read, so plan for all rows rather than a fast first row.
            try connection.execute("SET LOCAL cursor_tuple_fraction = 1.0")
            // One advertiser's listing reads a few thousand rows by key: starting parallel workers
            // for it costs more than they save (Self.serialPlans). An export of every ad keeps them.
            if serial { try connection.execute(Self.serialPlans.sql) }
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
    /// summed over the spans of `ReportSpans` that are not empty, for every ad or one advertiser's.
    /// Only clauses are chosen here, from fixed text by the granularity, the filter and which spans
    /// hold anything; every value is a parameter, numbered in the order the text uses them.
    ///
    /// The cost follows the rows read and handed on, so nothing is added that the answer does not
    /// need: an empty span is left out, one advertiser's name is the parameter rather than a join
    /// back to `ads`, and when a single rollup span of the listing's own bucket size is all there is
    /// (a daily listing over whole days), its rows are the answer's rows, with no regrouping.
    static func listingSQL(_ query: ReportQuery, state: LifecycleState, parameters: inout [any PostgresBindable]) -> String {
        let spans = ReportSpans(from: query.from, to: query.to, rolledUpTo: state.rolledUpTo, daysRolledUpTo: state.daysRolledUpTo,
                                useDays: query.granularity != .hour)
        var bound: [any PostgresBindable] = []
        func bind(_ value: any PostgresBindable) -> String {
            bound.append(value)
            return "$\(bound.count)"
        }
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
        let advertiser = query.advertiserID.map(bind)
        func only(_ column: String) -> String {
            advertiser.map { " AND \(column) IN (SELECT f.ad_id FROM ads f WHERE f.advertiser_id = \($0))" } ?? ""
        }
        enum Source { case days, hours, raw }
        func branch(_ source: Source, _ lower: ReportInstant, _ upper: ReportInstant) -> String {
            switch source {
            case .days:
                return """
                    SELECT x.ad_id, \(bucket("x.day")) AS bucket, \(CountColumn.rollupColumns)
                    FROM ad_daily_counts x WHERE x.day >= \(bind(lower)) AND x.day < \(bind(upper))\(only("x.ad_id"))
                    """
            case .hours:
                return """
                    SELECT x.ad_id, \(bucket("x.hour")) AS bucket, \(CountColumn.rollupColumns)
                    FROM ad_hourly_counts x WHERE x.hour >= \(bind(lower)) AND x.hour < \(bind(upper))\(only("x.ad_id"))
                    """
            case .raw:
                return """
                    SELECT e.ad_id, \(bucket("e.received_at")) AS bucket, \(CountColumn.rawCounts)
                    FROM events e WHERE e.received_at >= \(bind(lower)) AND e.received_at < \(bind(upper))\(only("e.ad_id")) GROUP BY 1, 2
                    """
            }
        }
        let all: [(Source, ReportInstant, ReportInstant)] = [
            (.days, spans.d1, spans.d2), (.hours, spans.h1, spans.d1), (.hours, spans.d2, spans.h2),
            (.raw, spans.from, spans.h1), (.raw, spans.h2, spans.to),
        ]
        // An empty range still needs one (empty) branch for the text to be a query.
        let present = all.filter { $0.1 != $0.2 }
        let used = present.isEmpty ? [all[0]] : present
        let advertiserColumn = advertiser.map { "\($0)::text" } ?? "a.advertiser_id"
        let join = advertiser == nil ? "\nLEFT JOIN ads a ON a.ad_id = r.ad_id" : ""
        let single = used.count == 1 ? used[0].0 : nil
        let rowsAreBuckets = (single == .days && query.granularity == .day) || (single == .hours && query.granularity == .hour)
        let sql: String
        if rowsAreBuckets {
            // One row per ad and bucket already (the rollups' primary keys).
            sql = """
                SELECT r.ad_id, \(advertiserColumn) AS advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
                \(CountColumn.allCases.map { "r.\($0.rawValue)" }.joined(separator: ", "))
                FROM (
                \(branch(used[0].0, used[0].1, used[0].2))
                ) r\(join)
                ORDER BY r.ad_id COLLATE "C", r.bucket
                """
        } else {
            sql = """
                SELECT r.ad_id, \(advertiserColumn) AS advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
                \(CountColumn.sums)
                FROM (
                \(used.map { branch($0.0, $0.1, $0.2) }.joined(separator: "\nUNION ALL\n"))
                ) r\(join)
                GROUP BY r.ad_id, \(advertiser == nil ? "a.advertiser_id, " : "")r.bucket
                ORDER BY r.ad_id COLLATE "C", r.bucket
                """
        }
        parameters.append(contentsOf: bound)
        return sql
    }
}
