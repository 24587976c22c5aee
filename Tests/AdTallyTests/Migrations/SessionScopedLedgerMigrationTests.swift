import AdTally
import Foundation
import Postgres
import TestSupport
import Testing

/// Migration 0009 scopes an event id to its session (API 1.3, rule 2). A database that stored events
/// under version 8 must come out answering replays of them with their first answers, and then take
/// the same id in another session as another event.
@Suite(.timeLimit(.minutes(5))) struct SessionScopedLedgerMigrationTests {
    @Test func replaysOfEventsStoredBeforeKeepTheirAnswers() throws {
        let migrations = try MigrationRunnerTests.projectMigrations()
        #expect(migrations.contains { $0.version == 9 })
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try MigrationRunner(migrations: migrations.filter { $0.version <= 8 }).apply(on: connection)

        // Version 8's answers, stored through its own statements: an accepted impression, a click
        // rejected as not in the feed. (The feed is registered after the migrations: today's
        // registration reads tables of later versions, and the replays below do not read it.)
        let impression = UUID().uuidString.lowercased(), click = UUID().uuidString.lowercased()
        try connection.execute("""
            INSERT INTO event_ids (event_id, session_id, type, ad_id, received_at, status, reason) VALUES
                ('\(impression)', 's1', 'impression', 'ad-1', now(), 'accepted', NULL),
                ('\(click)', 's1', 'click', 'ad-9', now(), 'rejected', 'ad_not_in_feed')
            """)

        let report = try MigrationRunner(migrations: migrations).apply(on: connection)
        #expect(report.applied.contains { $0.hasPrefix("0009") })
        _ = try FeedSnapshotStore().register(FeedSnapshotInput(snapshotID: "feed-1", ads: [StoreFixture.ad("ad-1", 0)]), sessionID: "s1",
                                         now: StoreFixture.start, on: connection)
        let key = try connection.query("""
            SELECT string_agg(a.attname, ',' ORDER BY k.ordinality) FROM pg_index i
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ordinality)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
            WHERE i.indrelid = 'event_ids'::regclass AND i.indisprimary
            """).first?.decode(String.self, at: 0)
        #expect(key == "session_id,event_id")

        let store = EventStore(clickRule: ClickRule.version1())
        let later = StoreFixture.start.adding(microseconds: 60_000_000)
        // Replays: their first answers, whatever else they say now; nothing new stored.
        let replays = try store.ingest([StoreFixture.event(.impression, "s1", "ad-1", id: impression),
                                        StoreFixture.event(.click, "s1", "ad-9", id: click)], receivedAt: .fixed(later), on: connection)
        #expect(replays == [.accepted, .rejected(.adNotInFeed)])
        // The same ids in another session are other events, judged on their own.
        _ = try FeedSnapshotStore().register(FeedSnapshotInput(snapshotID: "feed-2", ads: [StoreFixture.ad("ad-1", 0)]), sessionID: "s2",
                                         now: StoreFixture.start, on: connection)
        let elsewhere = try store.ingest([StoreFixture.event(.impression, "s2", "ad-1", id: impression),
                                          StoreFixture.event(.click, "s2", "ad-1", id: click)], receivedAt: .fixed(later), on: connection)
        #expect(elsewhere == [.accepted, .accepted])
        #expect(try connection.query("SELECT count(*) FROM event_ids").first?.decode(Int.self, at: 0) == 4)
        #expect(try connection.query("SELECT count(*) FROM sessions WHERE clicks_in_hour = 0").first?.decode(Int.self, at: 0) == 1)
    }
}
