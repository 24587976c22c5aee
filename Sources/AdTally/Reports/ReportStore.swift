import Postgres
import Timestamps

/// The report queries (API.md section 3). A report equals the count of the stored events it
/// covers, as if read from raw rows, for every `from`, `to` and `tz`: each bucket is read from the
/// coarsest rollup rows that lie wholly inside it (`ad_day_counts` of a phase, `ad_quarter_counts`,
/// and the hourly history of before 0010), and only the rest from raw events (`ReportSpans`), so a
/// report's cost follows the buckets and quarters it spans, not the events in them. Every count is
/// one of `CountColumn`'s, summed the same way from every source.
///
/// Consistency: `final_before` is read first, in a statement of its own; then one repeatable-read
/// snapshot reads how far the rollups reach and every count, so the quarter row that the fold keeps
/// adding to is read exactly as far as the snapshot's `folded_to` says, and every event received
/// before `final_before` is visible (ARCHITECTURE.md, "Why a folded quarter is exact").
public struct ReportStore: Sendable {
    /// Rows fetched from the listing's cursor per round trip (and written as one chunk).
    public let fetchSize: Int

    public init(fetchSize: Int = 1_000) {
        self.fetchSize = max(1, fetchSize)
    }

    /// The single-ad report: its advertiser, every count, and whether the range is final.
    public struct AdReport: Sendable, Equatable {
        public var adID: String
        /// nil for an ad never seen in a snapshot.
        public var advertiserID: String?
        public var values: CountValues
        public var counts: ReportCounts { values.totals }
        /// Rejected events per reason, in `CountColumn.rejectionReasons` order.
        public var rejections: [Int64] { values.rejections }
        /// Duplicate events per reason, in `CountColumn.duplicateReasons` order.
        public var duplicates: [Int64] { values.duplicates }
    }

    /// One row of a listing.
    public struct Row: Sendable, Equatable {
        public var adID: String
        public var advertiserID: String?
        /// Start of the local hour, day or month (microseconds); nil for `granularity=total`.
        public var bucketStart: Int64?
        /// Whether the range the row covers ends at or before `final_before`.
        public var final: Bool
        public var values: CountValues
        public var counts: ReportCounts { values.totals }
    }

    /// Counts for one ad in `[from, to)`; zeros when it has no events there. `finalBefore` was read
    /// before (nil on a standby: the published one is read in the snapshot); returned with the report.
    /// nil when `scope` may not see the ad (another advertiser's, or, for a key, one never
    /// registered): then no count of it is read (the statement's filter holds the scope too).
    public func adReport(adID: String, scope: ReportScope, from: Timestamp?, to: Timestamp?, finalBefore: Timestamp?,
                         on connection: PostgresConnection) throws -> (AdReport, Timestamp)? {
        // Key access only: a report reads ranges of keys, and a plan made from a partition's stale
        // statistics (today's, which fills during the day) must not scan the whole partition. A
        // plan that a migration made stale loses the transaction: it runs once more.
        try connection.withTransaction(TransactionOptions(isolation: .repeatableRead, readOnly: true),
                                       retry: .transientFailures(attempts: 2)) { transaction in
            var opening = PostgresPipeline()
            opening.add(Self.keyAccessOnly)
            opening.add(Self.serialPlans)
            opening.add(Self.noBitmapScans)
            let state = opening.add(LifecycleState.rollupStateQuery, decoding: LifecycleState.decodeRollups)
            let phases = opening.add(LifecycleState.phasesQuery, decoding: LifecycleState.decodePhases)
            let opened = try transaction.run(opening)
            let snapshot = try LifecycleState.combine(try opened[state], try opened[phases], finalBefore: finalBefore)
            let spans: ReportSpans
            do throws(ReportSpans.Unanswerable) {
                spans = try ReportSpans(from: from?.microsecondsSinceEpoch, to: to?.microsecondsSinceEpoch, unit: nil, zone: .utc,
                                        state: snapshot.rollups)
            } catch {
                throw ReportQuery.splitting(error, from: from, to: to)
            }
            var counting = PostgresPipeline()
            let report = counting.add(Self.adReportQuery(adID: adID, scope: scope, spans: spans)) { result -> (String?, CountValues) in
                // An aggregate without GROUP BY always returns exactly one row.
                guard let row = result.first else { throw PostgresError(kind: .typeMismatch, message: "report query returned no row") }
                var columns = row.columns()
                return (try columns.next(String?.self), try CountValues(&columns))
            }
            let (advertiserID, values) = try transaction.run(counting, commit: true)[report]
            guard scope.admits(advertiserID) else { return nil }
            return (AdReport(adID: adID, advertiserID: advertiserID, values: values), snapshot.finalBefore)
        }
    }

    /// No parallel workers for the rest of the transaction: a report of one ad or one advertiser
    /// reads hundreds to thousands of index entries, and a parallel plan (which PostgreSQL picks for
    /// the regrouping of an advertiser's listing with microsecond bounds) spends more starting its
    /// workers and merging their results than it saves, on a small machine most of all.
    static let serialPlans: PostgresQuery = "SET LOCAL max_parallel_workers_per_gather = 0"

    /// No bitmap scans for the rest of the transaction, for the reports that read one ad or one
    /// advertiser's ads: their raw rows are found by the ad, through `events_ad_received_idx` (a
    /// range of each ad's keys, already in order). A bitmap scan of the partitions' BRIN index on
    /// `received_at`, which PostgreSQL picked for the raw tail of today's `events_legacy` from stale
    /// statistics, is lossy: it rechecked 164,836 rows to return none, 30 ms of a listing that
    /// takes 3 (issue 55). A listing of every ad keeps them (it reads every row of its range).
    static let noBitmapScans: PostgresQuery = "SET LOCAL enable_bitmapscan = off"

    /// Every statement of the transaction reads its rows by key (`adtally_key_access_only`,
    /// migration 0005: a report reads ranges of keys, and a plan made from a partition's stale
    /// statistics must not scan the whole partition).
    static let keyAccessOnly: PostgresQuery = "SELECT adtally_key_access_only()"

    /// Which ads a statement counts.
    enum AdFilter {
        /// One ad; for an advertiser's key, only when it is that advertiser's (a one-time filter).
        case ad(String, scope: ReportScope)
        case advertiser(String)
        case all

        func condition(_ column: StaticString) -> PostgresQuery {
            switch self {
            case .ad(let id, .everyAdvertiser): return " AND \(unsafeSQL: column) = \(id)"
            case .ad(let id, .advertiser(let owner)):
                return " AND \(unsafeSQL: column) = \(id) AND EXISTS (SELECT 1 FROM ads o WHERE o.ad_id = \(id) AND o.advertiser_id = \(owner))"
            case .advertiser(let advertiser):
                // One advertiser: walk its ads from ads_advertiser_idx into each source's key.
                return " AND \(unsafeSQL: column) IN (SELECT f.ad_id FROM ads f WHERE f.advertiser_id = \(advertiser))"
            case .all: return ""
            }
        }
    }

    /// One source's rows over its spans: `(ad_id, bucket, counts...)`, a join of the spans (bound
    /// as arrays) with the source's key. Raw rows are counted per ad and bucket.
    static func branch(_ source: ReportSpan.Source, _ spans: [ReportSpan], filter: AdFilter, bucketed: Bool) -> PostgresQuery {
        let lows = PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: spans.map(\.lo))
        let highs = PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: spans.map(\.hi))
        let buckets = PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: spans.map(\.bucket))
        let steps = PostgresBinaryArray.int8(spans.map(\.step))
        let phases = PostgresBinaryArray.int8(spans.map { span -> Int64? in if case .days(let phase) = span.source { phase } else { nil } })
        let table: StaticString, time: StaticString, extra: StaticString, columns: PostgresQuery
        switch source {
        case .raw: (table, time, extra, columns) = ("events e", "e.received_at", "", CountColumn.rawCounts)
        case .quarters: (table, time, extra, columns) = ("ad_quarter_counts x", "x.quarter", "", CountColumn.rollupColumns)
        case .days: (table, time, extra, columns) = ("ad_day_counts x", "x.day", "x.phase = s.phase AND ", CountColumn.rollupColumns)
        case .legacyHours: (table, time, extra, columns) = ("ad_hourly_counts x", "x.hour", "", CountColumn.legacyRollupColumns)
        case .legacyDays: (table, time, extra, columns) = ("ad_daily_counts x", "x.day", "", CountColumn.legacyRollupColumns)
        }
        let adColumn: StaticString = source == .raw ? "e.ad_id" : "x.ad_id"
        let bucket: PostgresQuery = bucketed
            ? "CASE WHEN s.step IS NULL THEN s.bucket ELSE date_bin(s.step * interval '1 microsecond', \(unsafeSQL: time), s.bucket) END"
            : "NULL::timestamptz"
        let spanRows: PostgresQuery = """
            unnest(\(lows)::timestamptz[], \(highs)::timestamptz[], \(buckets)::timestamptz[], \(steps)::int8[], \(phases)::int8[])
                 AS s(lo, hi, bucket, step, phase)
            """
        var condition = filter.condition(adColumn)
        if source == .raw, case .advertiser(let advertiser) = filter {
            // One advertiser's raw rows, found ad by ad: its ads as an array make `ad_id = ANY`
            // a condition of the (ad_id, received_at) index itself, one range per ad and span. As
            // a semi-join (`IN (SELECT ...)`) the plan could start from the spans' times instead,
            // and did: with the spans bound as arrays PostgreSQL guesses a third of the table per
            // span, and one hot ad's rows made per-ad ranges look dearer than walking every ad's
            // entries of the range and looking each row's ad up (19,092 buffers, 52 ms, for a tail
            // of no rows; issue 55). A grouped LATERAL subquery per ad finds them by ad too, but
            // Citus cannot push down a grouped LATERAL over a reference table's rows.
            condition = " AND e.ad_id = ANY (ARRAY(SELECT f.ad_id FROM ads f WHERE f.advertiser_id = \(advertiser)))"
        }
        return """
            SELECT \(unsafeSQL: adColumn), \(bucket) AS bucket, \(columns)
            FROM \(spanRows)
            JOIN \(unsafeSQL: table) ON \(unsafeSQL: extra)\(unsafeSQL: time) >= s.lo AND \(unsafeSQL: time) < s.hi\(condition)
            """ + (source == .raw ? " GROUP BY 1, 2" : "")
    }

    /// Every source's branch, in a fixed order, for the spans that are not empty.
    static func branches(_ spans: ReportSpans, filter: AdFilter, bucketed: Bool) -> [PostgresQuery] {
        var sources: [ReportSpan.Source] = [.legacyDays, .legacyHours]
        var dayRows: [ReportSpan] = []
        for span in spans.spans { if case .days = span.source { dayRows.append(span) } }
        sources += [.quarters, .raw]
        var result: [PostgresQuery] = []
        if !dayRows.isEmpty { result.append(branch(.days(0), dayRows, filter: filter, bucketed: bucketed)) }
        for source in sources {
            let of = spans.spans(of: source)
            if !of.isEmpty { result.append(branch(source, of, filter: filter, bucketed: bucketed)) }
        }
        return result
    }

    /// The single-ad report: one row, the advertiser then every `CountColumn`, summed over the
    /// spans, each a range scan of a rollup's primary key or of `events_ad_received_idx`.
    static func adReportQuery(adID: String, scope: ReportScope, spans: ReportSpans) -> PostgresQuery {
        let parts = branches(spans, filter: .ad(adID, scope: scope), bucketed: false)
        let union: PostgresQuery = parts.isEmpty
            ? "SELECT NULL::text AS ad_id, NULL::timestamptz AS bucket, \(CountColumn.rollupColumns) FROM ad_quarter_counts x WHERE false"
            : parts.joined(separator: "\nUNION ALL\n")
        return """
            SELECT (SELECT a.advertiser_id FROM ads a WHERE a.ad_id = \(adID)),
            \(CountColumn.sums)
            FROM (
            \(union)
            ) r
            """
    }

    /// Streams the listing's rows, sorted by `ad_id` in byte order then `bucket_start`, in batches
    /// of `fetchSize` from a server-side cursor, inside one read-only repeatable-read transaction
    /// (every batch, and how far the rollups reach, from the same snapshot). `body` gets each batch
    /// and may throw to stop early (the client left); memory holds one batch at a time.
    /// `finalBefore` is the instant the listing answers (read before, in a statement of its own);
    /// `zone` the time zone's rules over the range.
    ///
    /// A transaction lost before the first batch was handed on (a plan that a migration made stale)
    /// is run once more; after that, the rows already sent cannot be taken back, and the error ends
    /// the stream.
    ///
    /// `scope` restricts the rows to one advertiser's ads for its key: the query's `advertiser_id`
    /// must then be absent or its own (`ReportScope.Forbidden` otherwise).
    func listing(_ query: ReportQuery, scope: ReportScope, finalBefore: Timestamp, zone: ZoneRules, on connection: PostgresConnection,
                 _ body: ([Row]) throws -> Void) throws {
        var query = query
        query.advertiserID = try scope.listingAdvertiser(query.advertiserID)
        try CursorStream.run(on: connection, fetchSize: fetchSize, prepare: { transaction in
            // The whole result is read, so plan for all rows rather than a fast first row.
            var opening = PostgresPipeline()
            opening.add("SET LOCAL cursor_tuple_fraction = 1.0")
            // One advertiser's listing reads a few thousand rows by key: starting parallel
            // workers for it costs more than they save (Self.serialPlans). An export of
            // every ad keeps them.
            if query.advertiserID != nil {
                opening.add(Self.serialPlans)
                opening.add(Self.noBitmapScans)
            }
            opening.add(Self.keyAccessOnly)
            let state = opening.add(LifecycleState.rollupStateQuery, decoding: LifecycleState.decodeRollups)
            let phases = opening.add(LifecycleState.phasesQuery, decoding: LifecycleState.decodePhases)
            let opened = try transaction.run(opening)
            let rollups = try LifecycleState.combine(try opened[state], try opened[phases], finalBefore: finalBefore).rollups
            let spans: ReportSpans
            do throws(ReportSpans.Unanswerable) {
                spans = try ReportSpans(from: query.from?.microsecondsSinceEpoch, to: query.to?.microsecondsSinceEpoch,
                                        unit: query.granularity.unit, zone: zone, state: rollups)
            } catch {
                throw ReportQuery.splitting(error, from: query.from, to: query.to)
            }
            let final = FinalRule(query: query, finalBefore: finalBefore, spans: spans)
            return (Self.listingQuery(query, spans: spans), { row in
                var columns = row.columns()
                let adID: String = try columns.next()
                let advertiserID: String? = try columns.next()
                let bucket = try columns.next(Int64?.self)
                return Row(adID: adID, advertiserID: advertiserID, bucketStart: bucket, final: final.isFinal(bucket),
                           values: try CountValues(&columns))
            })
        }, body)
    }

    /// API.md section 3, "Final rows": a row is final when the range it covers (its bucket clipped
    /// to `to`; for `total`, `[from, to)` with `to` given) ends at or before `final_before`.
    struct FinalRule {
        let to: Int64?
        let finalBefore: Int64
        let spans: ReportSpans

        init(query: ReportQuery, finalBefore: Timestamp, spans: ReportSpans) {
            self.to = query.to?.microsecondsSinceEpoch
            self.finalBefore = finalBefore.microsecondsSinceEpoch
            self.spans = spans
        }

        func isFinal(_ bucket: Int64?) -> Bool {
            guard let bucket else { return to.map { $0 <= finalBefore } ?? false }
            guard let end = spans.bucketEnd(of: bucket) else { return false }
            return min(end, to ?? end) <= finalBefore
        }
    }

    /// The listing's statement: every `CountColumn` per ad and bucket, summed over the spans of
    /// `ReportSpans`, for every ad or one advertiser's. Only clauses are chosen here, from fixed
    /// text by the granularity, the filter and which sources hold spans; every value (the spans
    /// too, as arrays) is a bound parameter.
    ///
    /// The cost follows the rows read and handed on, so nothing is added that the answer does not
    /// need: an empty source is left out, one advertiser's name is the parameter rather than a join
    /// back to `ads`, and when the rows of a single rollup source are each a bucket of their own (a
    /// daily listing over whole local days of one phase), they are the answer's rows, with no
    /// regrouping.
    static func listingQuery(_ query: ReportQuery, spans: ReportSpans) -> PostgresQuery {
        let filter: AdFilter = query.advertiserID.map(AdFilter.advertiser) ?? .all
        let bucketed = query.granularity != .total
        var parts = branches(spans, filter: filter, bucketed: bucketed)
        if parts.isEmpty {
            parts = ["SELECT x.ad_id, NULL::timestamptz AS bucket, \(CountColumn.rollupColumns) FROM ad_quarter_counts x WHERE false"]
        }
        let advertiserColumn: PostgresQuery
        if let advertiser = query.advertiserID {
            advertiserColumn = "\(advertiser)::text"
        } else {
            advertiserColumn = "a.advertiser_id"
        }
        let join: PostgresQuery = query.advertiserID == nil ? "\nLEFT JOIN ads a ON a.ad_id = r.ad_id" : ""
        if Self.rowsAreBuckets(spans, granularity: query.granularity) {
            // One row per ad and bucket already (the rollup's primary key).
            return """
                SELECT r.ad_id, \(advertiserColumn) AS advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
                \(CountColumn.columns(prefix: "r."))
                FROM (
                \(parts[0])
                ) r\(join)
                ORDER BY r.ad_id COLLATE "C", r.bucket
                """
        }
        return """
            SELECT r.ad_id, \(advertiserColumn) AS advertiser_id, (extract(epoch FROM r.bucket) * 1000000)::bigint AS bucket_start,
            \(CountColumn.sums)
            FROM (
            \(parts.joined(separator: "\nUNION ALL\n"))
            ) r\(join)
            GROUP BY r.ad_id, \(unsafeSQL: query.advertiserID == nil ? "a.advertiser_id, " : "")r.bucket
            ORDER BY r.ad_id COLLATE "C", r.bucket
            """
    }

    /// Whether every span is of one rollup source whose rows are each a whole bucket: day rows of
    /// a daily listing binned by the day, hourly rows of an hourly one.
    static func rowsAreBuckets(_ spans: ReportSpans, granularity: ReportQuery.Granularity) -> Bool {
        guard let first = spans.spans.first else { return false }
        let rowLength: Int64
        switch first.source {
        case .days, .legacyDays: rowLength = ReportSpans.day
        case .legacyHours: rowLength = ReportSpans.hour
        case .quarters, .raw: return false
        }
        let sameKind = spans.spans.allSatisfy { span in
            switch (span.source, first.source) {
            case (.days, .days), (.legacyDays, .legacyDays), (.legacyHours, .legacyHours): return true
            default: return false
            }
        }
        return sameKind && granularity != .total && spans.spans.allSatisfy { $0.step == rowLength }
    }
}

extension ReportQuery.Granularity {
    /// The buckets' unit; nil for `total`.
    var unit: BucketUnit? {
        switch self {
        case .total: return nil
        case .hour: return .hour
        case .day: return .day
        case .month: return .month
        }
    }
}
