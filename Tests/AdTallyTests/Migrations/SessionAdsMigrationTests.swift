import AdTally
import Contract
import Foundation
import Postgres
import TestSupport
import Testing
import Timestamps

/// Migration 0003 moves the feed facts and the claims into one `session_ads` row per pair. A
/// database that counted under version 2 must decide the same way after the upgrade: what was
/// served, where each ad is in the current feed, which impressions were counted, which click
/// windows are open.
@Suite(.timeLimit(.minutes(5))) struct SessionAdsMigrationTests {
    /// Applies versions 1 and 2, then `setUp`, then every migration; returns the connection.
    static func upgrade(after setUp: String) throws -> (TestDatabase, PostgresConnection, Result<MigrationRunner.Report, any Error>) {
        let migrations = try MigrationRunnerTests.projectMigrations()
        #expect(migrations.contains { $0.version == 3 })
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try MigrationRunner(migrations: migrations.filter { $0.version <= 2 }).apply(on: connection)
        try connection.execute(setUp)
        return (db, connection, Result { try MigrationRunner(migrations: migrations).apply(on: connection) })
    }

    @Test func upgradeKeepsFeedsClaimsAndWindows() throws {
        let start = StoreFixture.start
        // Version 2's rows, by hand: s1 saw feed-1 (ad-1 at 0, ad-2 at 5), then feed-2 (ad-1 at 3);
        // the impression of ad-2 was counted, and a click on ad-1 was accepted 10 s before `start`.
        let (_, connection, upgrade) = try Self.upgrade(after: """
            INSERT INTO ads VALUES ('ad-1', 'acme', now()), ('ad-2', 'acme', now());
            INSERT INTO sessions VALUES ('s1', 'feed-2', now(), now());
            INSERT INTO snapshot_owners VALUES ('feed-1', 's1'), ('feed-2', 's1');
            INSERT INTO snapshots VALUES ('s1', 'feed-1', 'f1', 2, '2026-11-29T13:00:00Z'), ('s1', 'feed-2', 'f2', 1, '2026-11-29T13:10:00Z');
            INSERT INTO snapshot_ads VALUES ('s1', 'feed-1', 'ad-1', 0, 'acme', 'https://acme.example/1'),
                                            ('s1', 'feed-1', 'ad-2', 5, 'acme', 'https://acme.example/2'),
                                            ('s1', 'feed-2', 'ad-1', 3, 'acme', 'https://acme.example/1');
            INSERT INTO impression_claims VALUES ('s1', 'ad-2', '\(UUID().uuidString.lowercased())', '2026-11-29T13:05:00Z');
            INSERT INTO click_windows VALUES ('s1', 'ad-1', '2026-11-29T13:46:50Z');
            """)
        let report = try upgrade.get()
        #expect(report.applied.contains { $0.hasPrefix("0003") })
        for table in ["impression_claims", "click_windows"] {
            #expect(try connection.query("SELECT to_regclass($1) IS NULL", [table]).first?.decode(Bool.self, at: 0) == true, "\(table)")
        }
        // ad-1 was first served with feed-1 (13:00), not when feed-2 made it current again.
        let firstServed = try connection.query("SELECT (extract(epoch FROM first_served_at) * 1000000)::bigint FROM session_ads WHERE ad_id = 'ad-1'")
            .first?.decode(Int64.self, at: 0)
        #expect(firstServed == start.microsecondsSinceEpoch - 47 * 60 * 1_000_000)

        let store = EventStore(clickRule: ClickRule.version1())
        func send(_ event: EventInput, at time: Timestamp = start) throws -> EventOutcome {
            try store.ingest([event], receivedAt: .fixed(time), on: connection)[0]
        }
        typealias F = StoreFixture
        #expect(try send(F.event(.click, "s1", "ad-1", snapshot: "feed-2", position: 3)) == .duplicate(.clickWithinWindow))
        #expect(try send(F.event(.click, "s1", "ad-1", position: 0)) == .rejected(.positionMismatch))
        #expect(try send(F.event(.click, "s1", "ad-1", snapshot: "feed-1")) == .rejected(.staleSnapshot))
        #expect(try send(F.event(.click, "s1", "ad-2")) == .rejected(.adNotInFeed))
        #expect(try send(F.event(.impression, "s1", "ad-2")) == .duplicate(.impressionAlreadyCounted))
        #expect(try send(F.event(.impression, "s1", "ad-1")) == .accepted)
        #expect(try send(F.event(.impression, "s1", "ad-3")) == .rejected(.adNotServed))
        // The window opened under version 2 closes 30 s after its click.
        let closes = Timestamp(microsecondsSinceEpoch: start.microsecondsSinceEpoch + 20_000_000)
        #expect(try send(F.event(.click, "s1", "ad-1"), at: closes) == .accepted)
    }

    @Test func aClaimForAnAdNeverServedStopsTheUpgrade() throws {
        // Cannot happen through AdTally (claims follow the feed rules); if it did, the upgrade must
        // refuse rather than drop the count with the old table.
        let (_, connection, upgrade) = try Self.upgrade(after: """
            INSERT INTO click_windows VALUES ('s9', 'ad-9', now());
            """)
        #expect(throws: (any Error).self) { try upgrade.get() }
        #expect(try connection.query("SELECT count(*) FROM schema_migrations").first?.decode(Int.self, at: 0) == 2)
        #expect(try connection.query("SELECT count(*) FROM click_windows").first?.decode(Int.self, at: 0) == 1)
    }
}
