@testable import AdTally
import Foundation
import Postgres
import Testing
import TestSupport

/// Migration 0005 turns a populated `events` table into the first partition of a partitioned one,
/// and starts the rollups at its oldest event. A database that counted under version 4 must answer
/// every report the same after it: before maintenance has folded anything (all raw rows), and after
/// the rollups caught up (whole hours and days from them, the edges from raw rows).
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

        let report = try MigrationRunner(migrations: migrations).apply(on: connection)
        #expect(report.applied.contains { $0.hasPrefix("0005") })
        #expect(try connection.query("SELECT relkind::text FROM pg_class WHERE relname = 'events'").first?.decode(String.self, at: 0) == "p")
        #expect(try connection.query("SELECT count(*) FROM events_legacy").first?.decode(Int.self, at: 0) == 3_000,
                "the rows stay where they were, in the first partition")
        let state = try LifecycleState.read(on: connection)
        #expect(state.rolledUpTo == floorHour(oldest), "the rollups start at the oldest event's hour")

        let store = ReportStore()
        func expectSame(_ state: LifecycleState, _ when: String) throws {
            for ad in (0..<6).map({ "ad-\($0)" }) {
                for (index, range) in ranges.enumerated() {
                    let answer = try store.adReport(adID: ad, from: range.0, to: range.1, state: state, on: connection)
                    #expect(answer.counts == before["\(ad)#\(index)"], "\(ad), range \(index), \(when)")
                    #expect(answer.advertiserID == "adv-\(Int(ad.dropFirst(3))! % 2)")
                }
            }
        }
        try expectSame(state, "before folding")

        // Maintenance folds the history: every complete hour up to now.
        while try Rollups.foldNextHour(on: connection).fold != nil {}
        while try Rollups.foldNextDay(on: connection).fold != nil {}
        let folded = try LifecycleState.read(on: connection)
        #expect(folded.rolledUpTo >= floorHour(newest), "the rollups reached the last complete hour")
        #expect(folded.daysRolledUpTo > state.daysRolledUpTo, "at least one whole day was folded")
        let rollupEvents = try connection.query("""
            SELECT coalesce(sum(impressions + clicks + duplicate_impressions + rejected_impressions + duplicate_clicks + rejected_clicks), 0)::bigint
            FROM ad_hourly_counts
            """).first?.decode(Int64.self, at: 0)
        let rawBeforeWatermark = try connection.query("SELECT count(*)::bigint FROM events WHERE received_at < $1", [folded.rolledUpTo]).first?.decode(Int64.self, at: 0)
        #expect(rollupEvents == rawBeforeWatermark, "every event before the watermark is in exactly one hour")
        try expectSame(folded, "after folding")

        // And the upgraded database goes on counting: a feed is registered, its ad's impression stored.
        let now = Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: Date()))
        _ = try FeedSnapshotStore().register(FeedSnapshotInput(snapshotID: "feed-new", ads: [StoreFixture.ad("ad-0", 0, advertiser: "adv-0")]),
                                         sessionID: "s-new", now: now, on: connection)
        let outcome = try EventStore(clickRule: ClickRule()).ingest([StoreFixture.event(.impression, "s-new", "ad-0", occurredAt: now)],
                                                                    receivedAt: .databaseClock, on: connection)
        #expect(outcome.map(\.status) == [.accepted])
    }
}
