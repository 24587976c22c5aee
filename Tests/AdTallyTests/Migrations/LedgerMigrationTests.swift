import AdTally
import Foundation
import Postgres
import TestSupport
import Testing
import Timestamps

/// Migration 0002 moves an event's identity to the ledger. A database that took events under
/// version 1 must come out of the upgrade answering replays of those events as before.
@Suite(.timeLimit(.minutes(5))) struct LedgerMigrationTests {
    @Test func upgradeKeepsReplaysOfEarlierEvents() throws {
        let migrations = try MigrationRunnerTests.projectMigrations()
        let first = try #require(migrations.first { $0.version == 1 })
        #expect(migrations.contains { $0.version == 2 })
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try MigrationRunner(migrations: [first]).apply(on: connection)

        // Version 1's writes for one accepted impression and one duplicate, by hand: the ledger
        // row without received_at, the event row with it.
        let accepted = UUID().uuidString.lowercased(), duplicate = UUID().uuidString.lowercased()
        let receivedAt = StoreFixture.start
        try connection.execute("""
            INSERT INTO ads VALUES ('ad-1', 'acme', now());
            INSERT INTO sessions VALUES ('s1', 'feed-1', now(), now());
            INSERT INTO snapshot_owners VALUES ('feed-1', 's1');
            INSERT INTO snapshots VALUES ('s1', 'feed-1', 'f', 1, now());
            INSERT INTO snapshot_ads VALUES ('s1', 'feed-1', 'ad-1', 0, 'acme', 'https://acme.example/');
            INSERT INTO impression_claims VALUES ('s1', 'ad-1', '\(accepted)', now());
            """)
        for (id, status, reason) in [(accepted, "accepted", nil), (duplicate, "duplicate", "impression_already_counted")] as [(String, String, String?)] {
            try connection.query("INSERT INTO event_ids (event_id, session_id, type, ad_id) VALUES ($1::uuid, 's1', 'impression', 'ad-1')", [id])
            try connection.query("""
                INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at)
                VALUES ('s1', $1::uuid, 'impression', 'ad-1', $2, $3, $4, $4)
                """, [id, status, reason, receivedAt])
        }

        let report = try MigrationRunner(migrations: migrations).apply(on: connection)
        #expect(report.applied.contains { $0.hasPrefix("0002") })
        let backfilled = try connection.query(
            "SELECT count(*) FROM event_ids WHERE received_at = $1", [receivedAt]).first?.decode(Int.self, at: 0)
        #expect(backfilled == 2)

        // Replays of both: their original answers, nothing new stored; a new impression is a duplicate.
        let store = EventStore(clickRule: ClickRule.version1())
        let later = Timestamp(microsecondsSinceEpoch: receivedAt.microsecondsSinceEpoch + 60_000_000)
        let outcomes = try store.ingest([StoreFixture.event(.impression, "s1", "ad-1", id: accepted), StoreFixture.event(.impression, "s1", "ad-1", id: duplicate),
                                         StoreFixture.event(.impression, "s1", "ad-1")], receivedAt: .fixed(later), on: connection)
        #expect(outcomes == [.accepted, .duplicate(.impressionAlreadyCounted), .duplicate(.impressionAlreadyCounted)])
        #expect(try connection.query("SELECT count(*) FROM events").first?.decode(Int.self, at: 0) == 3)
        #expect(try connection.query("SELECT count(*) FROM event_ids WHERE received_at IS NULL").first?.decode(Int.self, at: 0) == 0)
    }

    @Test func aLedgerRowWithoutItsEventStopsTheUpgrade() throws {
        // Cannot happen through AdTally (both rows are written in one transaction); if it did, the
        // upgrade must refuse rather than leave a replay that finds no outcome.
        let migrations = try MigrationRunnerTests.projectMigrations()
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try MigrationRunner(migrations: migrations.filter { $0.version == 1 }).apply(on: connection)
        try connection.query("INSERT INTO event_ids (event_id, session_id, type, ad_id) VALUES ($1::uuid, 's1', 'click', 'ad-1')",
                             [UUID().uuidString.lowercased()])
        #expect(throws: (any Error).self) { try MigrationRunner(migrations: migrations).apply(on: connection) }
        let applied = try connection.query("SELECT count(*) FROM schema_migrations").first?.decode(Int.self, at: 0)
        #expect(applied == 1)
    }
}
