@testable import AdTally
import Foundation
import Postgres
import TestSupport
import Testing
import Timestamps

/// Migration 0005 turns a populated `events` table into the first partition of a partitioned one,
/// and starts the rollups at its oldest event; 0010 leaves the hourly history where it is and
/// maintenance re-folds it into quarter hours. A database that counted under version 4 must answer
/// every report the same after each: after version 8 folded its hours and days, after 0010 with
/// the hourly rows, while they are re-folded, and after.
@Suite(.timeLimit(.minutes(5))) struct PartitionMigrationTests {
    /// Counts of one ad over `[from, to)`, by a query written here from the events' columns.
    static func rawCounts(_ connection: PostgresConnection, ad: String, from: Timestamp, to: Timestamp) throws -> ReportCounts {
        let row = try #require(try connection.query("""
            SELECT count(*) FILTER (WHERE type = 'impression' AND status = 'accepted'),
                   count(*) FILTER (WHERE type = 'click' AND status = 'accepted'),
                   count(*) FILTER (WHERE type = 'impression' AND status = 'duplicate'),
                   count(*) FILTER (WHERE type = 'impression' AND status = 'rejected'),
                   count(*) FILTER (WHERE type = 'click' AND status = 'duplicate'),
                   count(*) FILTER (WHERE type = 'click' AND status = 'rejected')
            FROM events WHERE ad_id = $1 AND received_at >= $2 AND received_at < $3
            """, [ad, from, to]).first)
        return ReportCounts(impressions: try row.decode(Int64.self, at: 0), clicks: try row.decode(Int64.self, at: 1),
                            duplicateImpressions: try row.decode(Int64.self, at: 2), rejectedImpressions: try row.decode(Int64.self, at: 3),
                            duplicateClicks: try row.decode(Int64.self, at: 4), rejectedClicks: try row.decode(Int64.self, at: 5))
    }

    @Test func aPopulatedVersion4DatabaseAnswersTheSameBeforeAndAfterTheRollups() throws {
        let migrations = try MigrationRunnerTests.projectMigrations()
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try MigrationRunner(migrations: migrations.filter { $0.version <= 4 }).apply(on: connection)

        // Version 4's rows: 3,000 events of 6 ads over the last 60 hours, every outcome, received
        // at odd microseconds, with their ledger rows.
        try connection.execute("""
            INSERT INTO ads (ad_id, advertiser_id, first_seen_at) SELECT 'ad-' || i, 'adv-' || (i % 2), now() - interval '4 days' FROM generate_series(0, 5) i;
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at)
            SELECT 's-' || (g % 40), md5('e' || g)::uuid, CASE WHEN g % 5 = 0 THEN 'click' ELSE 'impression' END, 'ad-' || (g % 6),
                   CASE WHEN g / 7 % 9 < 6 THEN 'accepted' WHEN g / 7 % 9 < 8 THEN 'duplicate' ELSE 'rejected' END,
                   CASE WHEN g / 7 % 9 < 6 THEN NULL WHEN g / 7 % 9 < 8 THEN (CASE WHEN g % 5 = 0 THEN 'click_within_window' ELSE 'impression_already_counted' END)
                        ELSE (CASE WHEN g % 5 = 0 THEN 'ad_not_in_feed' ELSE 'not_viewable' END) END,
                   t, t
            FROM generate_series(0, 2999) g, LATERAL (SELECT now() - interval '60 hours' + g * interval '71.9993 seconds' AS t) x;
            INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at, status, reason)
            SELECT event_id, session_id, type, ad_id, received_at, status, reason FROM events;
            """)
        let oldest = try #require(try connection.query("SELECT min(received_at) FROM events").first?.decode(Timestamp.self, at: 0))
        let newest = try #require(try connection.query("SELECT max(received_at) FROM events").first?.decode(Timestamp.self, at: 0))
        let end = newest.adding(microseconds: 1)
        let hour = ReportSpans.hour
        func floorHour(_ t: Timestamp) -> Timestamp { Timestamp(microsecondsSinceEpoch: t.microsecondsSinceEpoch - ((t.microsecondsSinceEpoch % hour) + hour) % hour) }
        // Ranges: everything, whole hours inside, microsecond bounds across hours and days.
        let ranges: [(Timestamp, Timestamp)] = [
            (oldest, end),
            (floorHour(oldest).adding(microseconds: 2 * hour), floorHour(newest).adding(microseconds: -hour)),
            (oldest.adding(microseconds: 3_600_000_123), newest.adding(microseconds: -7_200_000_321)),
            (oldest.adding(microseconds: 30 * hour + 17), end),
        ]
        var before: [String: ReportCounts] = [:]
        for ad in (0..<6).map({ "ad-\($0)" }) {
            for (index, range) in ranges.enumerated() { before["\(ad)#\(index)"] = try Self.rawCounts(connection, ad: ad, from: range.0, to: range.1) }
        }
        #expect(before.values.contains { $0.clicks > 0 && $0.duplicateImpressions > 0 && $0.rejectedClicks > 0 })

        let report = try MigrationRunner(migrations: migrations.filter { $0.version <= 8 }).apply(on: connection)
        #expect(report.applied.contains { $0.hasPrefix("0005") })
        #expect(try connection.query("SELECT relkind::text FROM pg_class WHERE relname = 'events'").first?.decode(String.self, at: 0) == "p")
        #expect(try connection.query("SELECT count(*) FROM events_legacy").first?.decode(Int.self, at: 0) == 3_000,
                "the rows stay where they were, in the first partition")
        #expect(try connection.query("SELECT rolled_up_to FROM lifecycle_state").first?.decode(Timestamp.self, at: 0) == floorHour(oldest),
                "the rollups start at the oldest event's hour")

        // Version 8's maintenance folds the history into hours and UTC days (its statements, here).
        let legacy = CountColumn.allCases.filter(\.inLegacyRollups)
        try connection.execute(PostgresQuery(unsafeRawSQL: """
            DO $$
            DECLARE h timestamptz;
            BEGIN
                LOOP
                    SELECT rolled_up_to INTO h FROM lifecycle_state;
                    EXIT WHEN h + interval '1 hour' > adtally_final_before();
                    INSERT INTO ad_hourly_counts (ad_id, hour, \(legacy.map(\.rawValue).joined(separator: ", ")))
                    SELECT e.ad_id, h, \(legacy.map { "count(*) FILTER (WHERE \($0.filter))" }.joined(separator: ", "))
                    FROM events e WHERE e.received_at >= h AND e.received_at < h + interval '1 hour' GROUP BY e.ad_id;
                    UPDATE lifecycle_state SET rolled_up_to = h + interval '1 hour';
                END LOOP;
                LOOP
                    SELECT days_rolled_up_to INTO h FROM lifecycle_state;
                    EXIT WHEN h + interval '1 day' > (SELECT rolled_up_to FROM lifecycle_state);
                    INSERT INTO ad_daily_counts (ad_id, day, \(legacy.map(\.rawValue).joined(separator: ", ")))
                    SELECT x.ad_id, h, \(legacy.map { "sum(x.\($0.rawValue))" }.joined(separator: ", "))
                    FROM ad_hourly_counts x WHERE x.hour >= h AND x.hour < h + interval '1 day' GROUP BY x.ad_id;
                    UPDATE lifecycle_state SET days_rolled_up_to = h + interval '1 day';
                END LOOP;
            END
            $$
            """))
        let hourlyRows = try connection.query("SELECT count(*) FROM ad_hourly_counts").first?.decode(Int.self, at: 0) ?? 0
        let dailyRows = try connection.query("SELECT count(*) FROM ad_daily_counts").first?.decode(Int.self, at: 0) ?? 0
        #expect(hourlyRows > 0 && dailyRows > 0)

        // Migration 0010 moves no row: the hourly history answers as it is, the edges from raw rows.
        let upgrade = try MigrationRunner(migrations: migrations).apply(on: connection)
        #expect(upgrade.applied.contains { $0.hasPrefix("0010") })
        #expect(try connection.query("SELECT count(*) FROM ad_hourly_counts").first?.decode(Int.self, at: 0) == hourlyRows)
        let state = try LifecycleState.read(on: connection)
        #expect(state.rollups.quartersFrom == state.rollups.foldedTo && state.rollups.refining)

        let store = ReportStore()
        func expectSame(_ when: String) throws {
            for ad in (0..<6).map({ "ad-\($0)" }) {
                for (index, range) in ranges.enumerated() {
                    let (answer, _) = try #require(try store.adReport(adID: ad, scope: .everyAdvertiser, from: range.0, to: range.1,
                                                                      finalBefore: nil, on: connection))
                    #expect(answer.counts == before["\(ad)#\(index)"], "\(ad), range \(index), \(when)")
                    #expect(answer.advertiserID == "adv-\(Int(ad.dropFirst(3))! % 2)")
                }
            }
        }
        try expectSame("after 0010, before any fold")

        // Maintenance folds what came since, then re-folds the hourly history from its raw rows, an
        // hour at a time, each checked equal to its hourly row, which goes.
        while let fold = try Rollups.foldRecent(statementTimeout: "60s", on: connection).fold, !fold.caughtUp {}
        try expectSame("after the continuous fold")
        var refined = 0
        while case .refined = try Rollups.refineLegacy(statementTimeout: "60s", on: connection).step {
            refined += 1
            if refined == 7 { try expectSame("half re-folded") }
        }
        #expect(refined > 0)
        #expect(try connection.query("SELECT count(*) FROM ad_hourly_counts").first?.decode(Int.self, at: 0) == 0)
        let refolded = try LifecycleState.read(on: connection)
        #expect(refolded.rollups.quartersFrom == nil && !refolded.rollups.refining)
        let rollupEvents = try connection.query("""
            SELECT coalesce(sum(impressions + clicks + duplicate_impressions + rejected_impressions + duplicate_clicks + rejected_clicks), 0)::bigint
            FROM ad_quarter_counts
            """).first?.decode(Int64.self, at: 0)
        let rawBeforeWatermark = try connection.query("SELECT count(*)::bigint FROM events WHERE received_at < $1", [refolded.foldedTo])
            .first?.decode(Int64.self, at: 0)
        #expect(rollupEvents == rawBeforeWatermark, "every event before the watermark is in exactly one quarter")
        while try Rollups.foldNextDay(statementTimeout: "60s", on: connection).fold != nil {}
        let dayRows = try connection.query("SELECT count(*) FROM ad_day_counts").first?.decode(Int.self, at: 0) ?? 0
        #expect(dayRows > 0)
        try expectSame("after folding days")

        // And the upgraded database goes on counting: a feed is registered, its ad's impression stored.
        let now = Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: Date()))
        _ = try FeedSnapshotStore().register(FeedSnapshotInput(snapshotID: "feed-new", ads: [StoreFixture.ad("ad-0", 0, advertiser: "adv-0")]),
                                         sessionID: "s-new", now: now, on: connection)
        let outcome = try EventStore(clickRule: ClickRule.configured()).ingest([StoreFixture.event(.impression, "s-new", "ad-0", occurredAt: now)],
                                                                    receivedAt: .databaseClock, on: connection)
        #expect(outcome.map(\.status) == [.accepted])
    }
}
