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
        let values = try connection.withTransaction(.readOnly, retry: .transientFailures(attempts: 2)) { transaction in
            var pipeline = PostgresPipeline()
            pipeline.add(CountingState.keyAccessOnly)
            pipeline.add(Self.serialPlans)
            let report = pipeline.add(Self.adReportQuery(adID: adID, spans: spans)) { result -> (String?, CountValues) in
                // An aggregate without GROUP BY always returns exactly one row.
                guard let row = result.first else { throw PostgresError(kind: .typeMismatch, message: "report query returned no row") }
                var columns = row.columns()
                return (try columns.next(String?.self), try CountValues(&columns))
            }
            return try transaction.run(pipeline, commit: true)[report]
        }
        let (advertiserID, counts) = values
        return AdReport(adID: adID, advertiserID: advertiserID, counts: counts.totals,
                        rejections: Self.rejectionReasons.map { reason in CountColumn.allCases.first { $0.reason == reason }.map { counts[$0] } ?? 0 },
                        duplicates: Self.duplicateReasons.map { reason in CountColumn.allCases.first { $0.reason == reason }.map { counts[$0] } ?? 0 })
    }

    /// No parallel workers for the rest of the transaction: a report of one ad or one advertiser
    /// reads hundreds to thousands of index entries, and a parallel plan (which PostgreSQL picks for
    /// the regrouping of an advertiser's listing with microsecond bounds) spends more starting its
    /// workers and merging their results than it saves, on a small machine most of all.
    static let serialPlans: PostgresQuery = "SET LOCAL max_parallel_workers_per_gather = 0"

    /// The single-ad report: one row, the advertiser then every `CountColumn`, summed over the
    /// five spans, each a range scan of a primary key or of `events_ad_received_idx`.
    static func adReportQuery(adID: String, spans: ReportSpans) -> PostgresQuery {
        """
        SELECT (SELECT a.advertiser_id FROM ads a WHERE a.ad_id = \(adID)),
        \(CountColumn.sums)
        FROM (
            SELECT \(CountColumn.rollupColumns) FROM ad_daily_counts x WHERE x.ad_id = \(adID) AND x.day >= \(spans.d1) AND x.day < \(spans.d2)
            UNION ALL
            SELECT \(CountColumn.rollupColumns) FROM ad_hourly_counts x WHERE x.ad_id = \(adID) AND x.hour >= \(spans.h1) AND x.hour < \(spans.d1)
            UNION ALL
            SELECT \(CountColumn.rollupColumns) FROM ad_hourly_counts x WHERE x.ad_id = \(adID) AND x.hour >= \(spans.d2) AND x.hour < \(spans.h2)
            UNION ALL
            SELECT \(CountColumn.rawCounts) FROM events e WHERE e.ad_id = \(adID) AND e.received_at >= \(spans.from) AND e.received_at < \(spans.h1)
            UNION ALL
            SELECT \(CountColumn.rawCounts) FROM events e WHERE e.ad_id = \(adID) AND e.received_at >= \(spans.h2) AND e.received_at < \(spans.to)
        ) r
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
    public func listing(_ query: ReportQuery, state: LifecycleState, on connection: PostgresConnection,
                        _ body: ([Row]) throws -> Void) throws {
        let sql = Self.listingQuery(query, state: state)
        do {
            try connection.withTransaction(TransactionOptions(isolation: .repeatableRead, readOnly: true),
                                           retry: .transientFailures(attempts: 2)) { transaction in
                var delivered = false
                do {
                    // The whole result is read, so plan for all rows rather than a fast first row.
                    var opening = PostgresPipeline()
                    opening.add("SET LOCAL cursor_tuple_fraction = 1.0")
                    // One advertiser's listing reads a few thousand rows by key: starting parallel
                    // workers for it costs more than they save (Self.serialPlans). An export of
                    // every ad keeps them.
                    if query.advertiserID != nil { opening.add(Self.serialPlans) }
                    opening.add(CountingState.keyAccessOnly)
                    opening.add("DECLARE report_rows NO SCROLL CURSOR FOR \(sql)")
                    _ = try transaction.run(opening)
                    while true {
                        let result = try transaction.query("FETCH FORWARD \(unescaped: String(fetchSize)) FROM report_rows")
                        var rows: [Row] = []
                        rows.reserveCapacity(result.rowCount)
                        for row in result.rows {
                            var columns = row.columns()
                            rows.append(Row(adID: try columns.next(), advertiserID: try columns.next(),
                                            bucketStart: try columns.next(Int64?.self).map(Timestamp.init(microsecondsSinceEpoch:)),
                                            counts: try CountValues(&columns).totals))
                        }
                        if !rows.isEmpty {
                            delivered = true
                            try body(rows)
                        }
                        if result.rowCount < fetchSize { break }
                    }
                    try transaction.query("CLOSE report_rows")
                } catch where delivered {
                    // Rows already sent cannot be taken back: no second run.
                    throw AfterDelivery(error: error)
                }
            }
        } catch let interrupted as AfterDelivery {
            throw interrupted.error
        }
    }

    /// A listing's failure after rows were handed on, which its transaction's retry must not run again.
    private struct AfterDelivery: Error {
        let error: any Error
    }

    /// The listing's statement: every `CountColumn` per ad and bucket, summed over the spans of
    /// `ReportSpans` that are not empty, for every ad or one advertiser's. Only clauses are chosen
    /// here, from fixed text by the granularity, the filter and which spans hold anything; every
    /// value is a bound parameter.
    ///
    /// The cost follows the rows read and handed on, so nothing is added that the answer does not
    /// need: an empty span is left out, one advertiser's name is the parameter rather than a join
    /// back to `ads`, and when a single rollup span of the listing's own bucket size is all there is
    /// (a daily listing over whole days), its rows are the answer's rows, with no regrouping.
    static func listingQuery(_ query: ReportQuery, state: LifecycleState) -> PostgresQuery {
        let spans = ReportSpans(from: query.from, to: query.to, rolledUpTo: state.rolledUpTo, daysRolledUpTo: state.daysRolledUpTo,
                                useDays: query.granularity != .hour)
        // date_bin is plain arithmetic on the stored instant (cheaper per event than date_trunc with a
        // time zone); from a UTC midnight origin its buckets are UTC days and hours.
        func bucket(_ column: String) -> PostgresQuery {
            switch query.granularity {
            case .total: return "NULL::timestamptz"
            case .day: return "date_bin('1 day', \(unescaped: column), timestamptz '2000-01-01T00:00:00Z')"
            case .hour: return "date_bin('1 hour', \(unescaped: column), timestamptz '2000-01-01T00:00:00Z')"
            }
        }
        // One advertiser: walk its ads from ads_advertiser_idx into each source's key.
        func only(_ column: String) -> PostgresQuery {
            guard let advertiser = query.advertiserID else { return "" }
            return " AND \(unescaped: column) IN (SELECT f.ad_id FROM ads f WHERE f.advertiser_id = \(advertiser))"
        }
        enum Source { case days, hours, raw }
        func branch(_ source: Source, _ lower: ReportInstant, _ upper: ReportInstant) -> PostgresQuery {
            switch source {
            case .days:
                return """
                    SELECT x.ad_id, \(bucket("x.day")) AS bucket, \(CountColumn.rollupColumns)
                    FROM ad_daily_counts x WHERE x.day >= \(lower) AND x.day < \(upper)\(only("x.ad_id"))
                    """
            case .hours:
                return """
                    SELECT x.ad_id, \(bucket("x.hour")) AS bucket, \(CountColumn.rollupColumns)
                    FROM ad_hourly_counts x WHERE x.hour >= \(lower) AND x.hour < \(upper)\(only("x.ad_id"))
                    """
            case .raw:
                return """
                    SELECT e.ad_id, \(bucket("e.received_at")) AS bucket, \(CountColumn.rawCounts)
                    FROM events e WHERE e.received_at >= \(lower) AND e.received_at < \(upper)\(only("e.ad_id")) GROUP BY 1, 2
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
        let advertiserColumn: PostgresQuery
        if let advertiser = query.advertiserID {
            advertiserColumn = "\(advertiser)::text"
        } else {
            advertiserColumn = "a.advertiser_id"
        }
        let join: PostgresQuery = query.advertiserID == nil ? "\nLEFT JOIN ads a ON a.ad_id = r.ad_id" : ""
        let single = used.count == 1 ? used[0].0 : nil
        let rowsAreBuckets = (single == .days && query.granularity == .day) || (single == .hours && query.granularity == .hour)
        if rowsAreBuckets {
            // One row per ad and bucket already (the rollups' primary keys).
            return """
                SELECT r.ad_id, \(advertiserColumn) AS advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
                \(unescaped: CountColumn.columns(prefix: "r."))
                FROM (
                \(branch(used[0].0, used[0].1, used[0].2))
                ) r\(join)
                ORDER BY r.ad_id COLLATE "C", r.bucket
                """
        }
        return """
            SELECT r.ad_id, \(advertiserColumn) AS advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
            \(CountColumn.sums)
            FROM (
            \(used.map { span in branch(span.0, span.1, span.2) }.joined(separator: "\nUNION ALL\n"))
            ) r\(join)
            GROUP BY r.ad_id, \(unescaped: query.advertiserID == nil ? "a.advertiser_id, " : "")r.bucket
            ORDER BY r.ad_id COLLATE "C", r.bucket
            """
    }
}
