@testable import AdTally
import Postgres
import TestSupport
import Testing
import Timestamps

/// The report queries use the indexes that lead with their filtered columns: no scan of the whole
/// events table for one ad or one advertiser. Checked with EXPLAIN on 100,000 generated events over
/// 1,000 ads of 100 advertisers (small enough for a test, large enough that the planner's choice means something).
@Suite(.timeLimit(.minutes(5))) struct ReportPlanTests {
    /// Loads the data (about a minute for both tests together on a loaded 2-core machine) off the
    /// cooperative pool: on it, the two tests held both of its threads and every other test of
    /// the run waited for them.
    static func loaded() async throws -> ReportFixture {
        try await offThePool { try load() }
    }

    static func load() throws -> ReportFixture {
        let r = try ReportFixture()
        try r.connection.execute("""
            INSERT INTO ads (ad_id, advertiser_id)
            SELECT format('ad-%s', i), format('adv-%s', i % 100) FROM generate_series(0, 999) AS i;
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at)
            SELECT 's-' || g, gen_random_uuid(), CASE WHEN g % 10 = 0 THEN 'click' ELSE 'impression' END,
                   format('ad-%s', (g * 7) % 1000), 'accepted', NULL, t, t
            FROM generate_series(0, 99999) AS g,
                 LATERAL (SELECT timestamptz '2026-11-01T00:00:00Z' + g * interval '25 seconds' AS t) AS x;
            """)
        // VACUUM cannot share a statement list (an implicit transaction) with the inserts.
        try r.connection.execute("VACUUM (ANALYZE) events")
        try r.connection.execute("ANALYZE ads")
        return r
    }

    func plan(_ query: PostgresQuery, on connection: PostgresConnection) throws -> String {
        let explain: PostgresQuery = "EXPLAIN \(query)"
        return try connection.query(explain).rows.compactMap { $0.rawText(at: 0) }.joined(separator: "\n")
    }

    /// Rollups up to the middle of the data (hours and days before it from the rollup tables, the
    /// rest from raw rows), as after maintenance.
    static let state = RollupState(foldedTo: ReportFixture.time("2026-11-15T07:00:00Z").microsecondsSinceEpoch, quartersFrom: nil,
                                   legacyDaysTo: Int64.min, refining: false,
                                   phases: [.init(minutes: 0, daysFrom: ReportFixture.time("2026-11-01T00:00:00Z").microsecondsSinceEpoch,
                                                  daysTo: ReportFixture.time("2026-11-15T00:00:00Z").microsecondsSinceEpoch)],
                                   lowerExtent: ReportFixture.time("2026-11-01T00:00:00Z").microsecondsSinceEpoch,
                                   upperExtent: ReportFixture.time("2026-12-01T00:00:00Z").microsecondsSinceEpoch)

    @Test func singleAdIsAnIndexRangeScan() async throws {
        let r = try await Self.loaded()
        for (from, to) in [(nil, nil), (ReportFixture.time("2026-11-05T00:30:00Z"), ReportFixture.time("2026-11-20T00:00:01Z"))] as [(Timestamp?, Timestamp?)] {
            let spans = try ReportSpans(from: from?.microsecondsSinceEpoch, to: to?.microsecondsSinceEpoch, unit: nil, zone: .utc, state: Self.state)
            let plan = try plan(ReportStore.adReportQuery(adID: "ad-42", scope: .everyAdvertiser, spans: spans), on: r.connection)
            #expect(plan.contains("ad_received_idx"), "\(plan)")
            // An advertiser's key adds a one-time check of the ad's owner by its key, nothing per row.
            let keyed = try self.plan(ReportStore.adReportQuery(adID: "ad-42", scope: .advertiser("acme"), spans: spans), on: r.connection)
            #expect(keyed.contains("ad_received_idx") && keyed.contains("ads_pkey") && keyed.contains("One-Time Filter"), "\(keyed)")
            #expect(plan.contains("ad_quarter_counts_pkey") && plan.contains("ad_day_counts_pkey"), "\(plan)")
            // The data is in events_legacy (received before the tests' day); the future days' partitions are empty.
            #expect(!plan.contains("Seq Scan on events_legacy"), "\(plan)")
        }
    }

    /// Key access only makes PostgreSQL add a disable cost of 10^10 to the sequential scans it
    /// cannot avoid (the one-row `lifecycle_state`), far above the JIT thresholds: every report's
    /// opening statement was compiled with LLVM, 200-300 ms for a statement of 0.1 ms (migration
    /// 0012). JIT is available on this server (Debian's PostgreSQL ships it), so the plan would
    /// show it if the transaction let it run.
    @Test func keyAccessOnlyNeverCompilesWithJIT() async throws {
        let r = try ReportFixture()
        #expect(try r.connection.query("SELECT pg_jit_available()").first?.decode(Bool.self, at: 0) == true,
                "this PostgreSQL has no JIT: the test below cannot fail")
        try r.connection.withTransaction { transaction in
            try transaction.query(CountingState.keyAccessOnly)
            for query in [LifecycleState.rollupStateQuery, LifecycleState.phasesQuery] {
                let explain: PostgresQuery = "EXPLAIN \(query)"
                let plan = try transaction.query(explain).rows.compactMap { $0.rawText(at: 0) }.joined(separator: "\n")
                #expect(plan.contains("cost="), "\(plan)")
                #expect(!plan.contains("JIT"), "\(plan)")
            }
        }
    }

    @Test func advertiserListingWalksTheAdvertisersAds() async throws {
        let r = try await Self.loaded()
        for granularity in ReportQuery.Granularity.allCases {
            let query = ReportQuery(from: ReportFixture.time("2026-11-05T00:00:00Z"), to: ReportFixture.time("2026-11-20T00:00:00Z"),
                                    advertiserID: "adv-7", granularity: granularity)
            let spans = try ReportSpans(from: query.from?.microsecondsSinceEpoch, to: query.to?.microsecondsSinceEpoch, unit: granularity.unit,
                                        zone: .utc, state: Self.state)
            let plan = try plan(ReportStore.listingQuery(query, spans: spans), on: r.connection)
            #expect(plan.contains("ad_received_idx"), "\(plan)")
            #expect(plan.contains("ads_advertiser_idx"), "\(plan)")
            #expect(!plan.contains("Seq Scan on events_legacy"), "\(plan)")
        }
    }

    /// One hot ad holding every raw row of its advertiser (bench-reports' "hot now"): the listing
    /// must still find the raw tail by each ad's key. From the spans' times alone (bound as
    /// arrays, so the planner guesses a third of the table per span) PostgreSQL walked every entry
    /// of the range and looked each row's ad up afterwards: 19,092 buffers and 52 ms for a tail of
    /// no rows, in the transaction's own settings (no bitmap scans, key access only).
    @Test func hotAdvertisersListingFindsItsRawRowsByAd() async throws {
        let r = try await offThePool { () throws -> ReportFixture in
            let r = try ReportFixture()
            try r.connection.execute("""
                INSERT INTO ads (ad_id, advertiser_id)
                SELECT format('hot-%s', lpad(i::text, 3, '0')), 'adv-hot' FROM generate_series(0, 99) AS i;
                INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at)
                SELECT 's-' || g, gen_random_uuid(), 'impression', 'hot-000', 'accepted', NULL, t, t
                FROM generate_series(0, 59999) AS g,
                     LATERAL (SELECT timestamptz '2026-11-15T06:00:00Z' + g * interval '100 milliseconds' AS t) AS x;
                """)
            try r.connection.execute("VACUUM (ANALYZE) events")
            try r.connection.execute("ANALYZE ads")
            return r
        }
        let query = ReportQuery(from: ReportFixture.time("2026-11-15T07:00:00Z"), to: ReportFixture.time("2026-11-15T08:00:00Z"),
                                advertiserID: "adv-hot", granularity: .day)
        let spans = try ReportSpans(from: query.from?.microsecondsSinceEpoch, to: query.to?.microsecondsSinceEpoch, unit: query.granularity.unit,
                                    zone: .utc, state: Self.state)
        #expect(spans.spans(of: .raw).isEmpty == false, "the range must have a raw tail for this test to mean something")
        let plan = try r.connection.withTransaction { transaction -> String in
            for setting in [ReportStore.keyAccessOnly, ReportStore.serialPlans, ReportStore.noBitmapScans] { try transaction.query(setting) }
            let explain: PostgresQuery = "EXPLAIN \(ReportStore.listingQuery(query, spans: spans))"
            return try transaction.query(explain).rows.compactMap { $0.rawText(at: 0) }.joined(separator: "\n")
        }
        #expect(plan.contains("Index Cond: ((ad_id = ANY ($"), "\(plan)")
        #expect(!plan.contains("Index Cond: ((received_at >="), "\(plan)")
    }
}
