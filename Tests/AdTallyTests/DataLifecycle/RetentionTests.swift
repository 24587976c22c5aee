@testable import AdTally
import AdTallyApp
import Dispatch
import Foundation
import Postgres
import TestSupport
import Testing
import Timestamps

/// Retention that leaves nothing behind (API 1.3, section 7): the junk of ads no snapshot
/// registered goes with its raw rows, and a maintenance statement given up leaves no partition.
@Suite(.timeLimit(.minutes(5))) struct RetentionTests {
    typealias F = StoreFixture

    /// Every row of any table that names one of `ads` (an `ad_id` column or a session's last click).
    static func rowsNaming(_ prefix: String, on connection: PostgresConnection) throws -> [String: Int] {
        var found: [String: Int] = [:]
        let columns = try connection.query("""
            SELECT c.table_name::text, c.column_name::text FROM information_schema.columns c
            JOIN pg_class k ON k.relname = c.table_name AND k.relkind IN ('r', 'p')
            WHERE c.table_schema = current_schema() AND c.column_name IN ('ad_id', 'last_click_ad_id') AND NOT k.relispartition
            """).rows.map { (try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1)) }
        for (table, column) in columns {
            let n = try connection.query(PostgresQuery(unsafeRawSQL: "SELECT count(*) FROM \"\(table)\" WHERE \"\(column)\" LIKE $1", binds: [prefix + "%"]))
                .first?.decode(Int.self, at: 0) ?? 0
            if n > 0 { found["\(table).\(column)"] = n }
        }
        return found
    }

    @Test func unregisteredAdsLeaveNothingBehindTheirRawRows() async throws {
        let r = try ReportFixture()
        let f = r.store
        try LifecycleTests.dailyPartitionsFrom(daysAgo: 100, on: f.connection)
        let now = Date()
        func daysAgo(_ days: Int, hour: Int) -> Timestamp {
            let day = PostgresTimestamp.microseconds(of: now.addingTimeInterval(-Double(days) * 86_400))
            return Timestamp(microsecondsSinceEpoch: day - day % ReportSpans.day + Int64(hour) * ReportSpans.hour + 7 * 60 * 1_000_000)
        }
        try f.connection.query("SELECT adtally_restart_rollups($1)", [daysAgo(99, hour: 0)])
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 1)])
        // Registered ads' events, old and recent; 2,000 made-up ads' events through the real store
        // (rejected, with ledger rows), 95 and 94 days ago.
        for (days, hour) in [(95, 10), (94, 3), (20, 14)] {
            _ = try f.events.ingest([F.event(.impression, "s1", "ad-1"), F.event(.click, "s1", "ad-2")], receivedAt: .fixed(daysAgo(days, hour: hour)),
                                    on: f.connection)
        }
        for batch in 0..<4 {
            let events = (0..<500).map { i in
                F.event(i % 3 == 0 ? .click : .impression, "junk-s-\((batch * 500 + i) % 37)", "junk-\(batch * 500 + i)")
            }
            _ = try f.events.ingest(events, receivedAt: .fixed(daysAgo(95 - batch % 2, hour: 5 + batch)), on: f.connection)
        }
        #expect(try Self.rowsNaming("junk-", on: f.connection)["events.ad_id"] == 2_000)
        for zone in ["Asia/Kolkata", "America/New_York"] { try Rollups.registerZone(zone, on: f.connection) }
        try await offThePool { try LifecycleTests.foldAll(f.connection) }
        #expect(try Self.rowsNaming("junk-", on: f.connection)["ad_quarter_counts.ad_id"] == 2_000)
        #expect((try Self.rowsNaming("junk-", on: f.connection)["ad_day_counts.ad_id"] ?? 0) > 2_000)
        let range = "from=\(daysAgo(99, hour: 0).rfc3339)&to=\(daysAgo(1, hour: 0).rfc3339)"
        let listed = await r.get("/v1/reports/ads?\(range)").json["rows"]?.arrayValue ?? []
        #expect(listed.count == 2_002, "while their raw rows exist, the made-up ads are listed")
        let before = await r.get("/v1/reports/ads?\(range)&granularity=day&tz=Asia/Kolkata&advertiser_id=acme").textWithoutFinalBefore
        let single = await r.get("/v1/reports/ads/ad-1?\(range)").textWithoutFinalBefore

        // A credit of the registered ads' accepted events, old and recent (API 1.4).
        let credit = AdjustmentRequest(adjustmentID: "old-and-new", reason: .sivt, from: daysAgo(99, hour: 0), to: daysAgo(1, hour: 0),
                                       sessionIDs: ["s1"])
        guard case .created(let adjustment) = try AdjustmentStore(limit: .configured).make(credit, horizon: Timestamp(microsecondsSinceEpoch: .min), on: f.connection) else {
            Issue.record("the adjustment was not made")
            return
        }
        // The first impression and three clicks (95, 94 and 20 days ago) were accepted.
        #expect(try f.count("SELECT count(*) FROM credit_marks") == 4)

        // Past the retention (a fixed clock: 90 days before now), with a session TTL of 30 days.
        let maintenance = Maintenance(settings: .init(eventsRetentionDays: 90, sessionTTLDays: 30, budget: 120, limit: .configured))
        let report = await offThePool { maintenance.run(on: f.connection, now: now) }
        #expect(report.result == .ok, "\(report.error ?? "")")
        #expect(report.unregisteredRowsDeleted > 4_000)
        // The mark of the dropped raw row went with it; the credit itself stays as it was.
        #expect(report.creditMarksPruned == 3)
        #expect(try f.count("SELECT count(*) FROM credit_marks WHERE received_at > $1", [daysAgo(21, hour: 0)]) == 1)
        #expect(try AdjustmentStore(limit: .configured).read("old-and-new", on: f.connection) == adjustment)
        #expect(try Self.rowsNaming("junk-", on: f.connection) == [:], "nothing of a made-up ad survives its raw rows")
        #expect(try f.count("SELECT count(*) FROM sessions WHERE session_id LIKE 'junk-%'") == 0)
        #expect(try f.count("SELECT count(*) FROM event_ids WHERE received_at < $1", [daysAgo(8, hour: 0)]) == 0)
        let after = await r.get("/v1/reports/ads?\(range)").json["rows"]?.arrayValue ?? []
        #expect(after.map { $0["ad_id"]?.stringValue ?? "" } == ["ad-1", "ad-2"])
        // The registered ads' counts are unchanged and exact.
        #expect(await r.get("/v1/reports/ads?\(range)&granularity=day&tz=Asia/Kolkata&advertiser_id=acme").textWithoutFinalBefore == before)
        #expect(await r.get("/v1/reports/ads/ad-1?\(range)").textWithoutFinalBefore == single)
        #expect(ReportFixture.counts(await r.get("/v1/reports/ads/ad-1?\(range)").json) == ReportCounts(impressions: 1, duplicateImpressions: 2))
    }

    @Test func aDetachGivenUpAtTheStatementLimitLeavesNoPartitionAfterTheNextRun() async throws {
        let r = try ReportFixture()
        let f = r.store
        try LifecycleTests.dailyPartitionsFrom(daysAgo: 93, on: f.connection)
        let now = Date()
        let old = Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: now.addingTimeInterval(-92 * 86_400)))
        try f.connection.query("SELECT adtally_restart_rollups($1)", [old.adding(microseconds: -ReportSpans.day)])
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        _ = try f.events.ingest([F.event(.impression, "s1", "ad-1")], receivedAt: .fixed(old), on: f.connection)
        try LifecycleTests.foldAll(f.connection)
        func aged() throws -> Int {
            // Tables named like a day's partition, attached or not, of the days before the horizon.
            try f.count("""
                SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relname ~ '^events_p[0-9]{8}$' AND c.relkind IN ('r', 'p')
                  AND to_date(substr(c.relname, 9), 'YYYYMMDD') < (now() - interval '90 days')::date
                """)
        }
        #expect(try aged() >= 2)

        // A long REPEATABLE READ transaction that has read events: DETACH ... CONCURRENTLY waits for
        // it, and gives up at the 1 s limit (cancelled on the server).
        let holder = try f.database.connect()
        try holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        _ = try holder.query("SELECT count(*) FROM events")
        let maintenance = Maintenance(settings: .init(eventsRetentionDays: 90, sessionTTLDays: 3_650, budget: 60, limit: StatementLimit(.seconds(1))))
        let held = await offThePool { maintenance.run(on: f.connection, now: now) }
        #expect(held.result == .ok, "\(held.error ?? "")")
        #expect(held.partitionsDropped.isEmpty, "\(held.partitionsDropped)")
        #expect(try f.count("SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%DETACH PARTITION%' AND state = 'active' AND pid <> pg_backend_pid()") == 0,
                "the statement given up is not running on the server")
        try holder.execute("COMMIT")

        // Another half-done one: detached, never dropped.
        let leftover = try #require(try f.connection.query("""
            SELECT name FROM adtally_event_partitions() WHERE name ~ '^events_p' AND NOT detach_pending ORDER BY upper LIMIT 1
            """).first?.decode(String.self, at: 0))
        try f.connection.execute(PostgresQuery(unsafeRawSQL: "ALTER TABLE events DETACH PARTITION \"\(leftover)\""))

        let next = await offThePool { maintenance.run(on: f.connection, now: now) }
        #expect(next.result == .ok, "\(next.error ?? "")")
        #expect(next.leftoversDropped == [leftover])
        #expect(try aged() == 0, "no partition of an aged day is left, attached, pending or detached")
        #expect(try f.count("SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhdetachpending") == 0)
        // The counts outlived it.
        #expect(ReportFixture.counts(await r.get("/v1/reports/ads/ad-1").json).impressions == 1)
    }
}
