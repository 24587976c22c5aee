import AdTally
import Contract
import Foundation
import Postgres
import TestSupport
import Testing
import Timestamps

/// Migration 0004 adds what the tap rule and the grace window read, and the outcomes to the ledger.
/// A database that counted under version 3 must come out of it with every earlier snapshot knowing
/// when it was replaced, every session its last accepted click, and every replay its answer.
@Suite(.timeLimit(.minutes(5))) struct TapGraceMigrationTests {
    @Test func upgradeBackfillsReplacementsLastClicksAndLedgerOutcomes() throws {
        let migrations = try MigrationRunnerTests.projectMigrations()
        #expect(migrations.contains { $0.version == 4 })
        let db = try TestDatabase.create()
        let connection = try db.connect()
        try MigrationRunner(migrations: migrations.filter { $0.version <= 3 }).apply(on: connection)

        // Version 3's rows, by hand: s1 saw feed-1 (x at 3) at 13:00, feed-2 (x at 8) at 13:40, and
        // feed-3 (x at 8) at 13:45, current. Two accepted clicks (x at 13:41, y at 13:44:30) and a
        // duplicate, all received within the last 8 days; s2 has one snapshot and no clicks.
        let now = Date()
        func ago(_ seconds: Double) -> String { PostgresTimestamp.format(microseconds: PostgresTimestamp.microseconds(of: now.addingTimeInterval(-seconds))) }
        let accepted = UUID().uuidString.lowercased(), later = UUID().uuidString.lowercased(), duplicate = UUID().uuidString.lowercased()
        try connection.execute("""
            INSERT INTO ads VALUES ('x', 'acme', now()), ('y', 'globex', now());
            INSERT INTO sessions VALUES ('s1', 'feed-3', '\(ago(900))', now()), ('s2', 'feed-9', '\(ago(100))', now());
            INSERT INTO snapshot_owners VALUES ('feed-1', 's1'), ('feed-2', 's1'), ('feed-3', 's1'), ('feed-9', 's2');
            INSERT INTO snapshots VALUES ('s1', 'feed-1', 'f1', 1, '\(ago(3300))'), ('s1', 'feed-2', 'f2', 2, '\(ago(1200))'),
                                         ('s1', 'feed-3', 'f3', 2, '\(ago(900))'), ('s2', 'feed-9', 'f9', 1, '\(ago(100))');
            INSERT INTO snapshot_ads VALUES ('s1', 'feed-1', 'x', 3, 'acme', 'https://acme.example/'),
                                            ('s1', 'feed-2', 'x', 8, 'acme', 'https://acme.example/'),
                                            ('s1', 'feed-2', 'y', 9, 'globex', 'https://globex.example/'),
                                            ('s1', 'feed-3', 'x', 8, 'acme', 'https://acme.example/'),
                                            ('s1', 'feed-3', 'y', 9, 'globex', 'https://globex.example/'),
                                            ('s2', 'feed-9', 'x', 1, 'acme', 'https://acme.example/');
            INSERT INTO session_ads (session_id, ad_id, first_served_at, current_snapshot_id, current_position, last_click_event_id, last_click_at)
            VALUES ('s1', 'x', '\(ago(3300))', 'feed-3', 8, '\(accepted)', '\(ago(1100))'),
                   ('s1', 'y', '\(ago(1200))', 'feed-3', 9, '\(later)', '\(ago(910))'),
                   ('s2', 'x', '\(ago(100))', 'feed-9', 1, NULL, NULL);
            """)
        for (id, ad, status, reason, occurred, received) in [
            (accepted, "x", "accepted", nil, ago(1140), ago(1100)), (later, "y", "accepted", nil, ago(930), ago(910)),
            (duplicate, "y", "duplicate", "click_within_window", ago(929), ago(905)),
        ] as [(String, String, String, String?, String, String)] {
            try connection.query("INSERT INTO event_ids VALUES ($1::uuid, 's1', 'click', $2, $3)", [id, ad, received])
            try connection.query("""
                INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at)
                VALUES ('s1', $1::uuid, 'click', $2, $3, $4, $5, $6)
                """, [id, ad, status, reason, occurred, received])
        }

        let report = try MigrationRunner(migrations: migrations).apply(on: connection)
        #expect(report.applied.contains { $0.hasPrefix("0004") })

        let replaced = try connection.query("""
            SELECT snapshot_id, replaced_at = (SELECT registered_at FROM snapshots n WHERE n.session_id = s.session_id AND n.snapshot_id = $1),
                   replaced_at = (SELECT registered_at FROM snapshots n WHERE n.session_id = s.session_id AND n.snapshot_id = $2), replaced_at IS NULL
            FROM snapshots s ORDER BY session_id, registered_at
            """, ["feed-2", "feed-3"]).rows.map { try ($0.decode(String.self, at: 0), $0.decode(Bool?.self, at: 1), $0.decode(Bool?.self, at: 2), $0.decode(Bool.self, at: 3)) }
        #expect(replaced.map(\.0) == ["feed-1", "feed-2", "feed-3", "feed-9"])
        #expect(replaced[0].1 == true)   // feed-1 replaced when feed-2 came
        #expect(replaced[1].2 == true)   // feed-2 when feed-3 came
        #expect(replaced[2].3 && replaced[3].3)  // the current ones are not replaced

        let lastClick = try connection.query("SELECT last_click_ad_id, last_click_occurred_at = $1::timestamptz FROM sessions WHERE session_id = 's1'",
                                             [ago(930)]).first
        #expect(try lastClick?.decode(String?.self, at: 0) == "y")
        #expect(try lastClick?.decode(Bool?.self, at: 1) == true)
        #expect(try connection.query("SELECT last_click_ad_id FROM sessions WHERE session_id = 's2'").first?.decode(String?.self, at: 0) == nil)
        #expect(try connection.query("SELECT count(*) FROM event_ids i JOIN events e USING (event_id) WHERE i.status = e.status AND i.reason IS NOT DISTINCT FROM e.reason")
            .first?.decode(Int.self, at: 0) == 3)

        // The store decides on the upgraded rows: replays answer as before, a tap while feed-2 was
        // current is judged against it (grace), and the tap rule knows the last accepted click.
        // API 1.2's defaults (this test clicks without impressions, which 1.3's defaults refuse).
        let store = EventStore(clickRule: ClickRule.configured(needsImpression: false, sessionClickLimit: 0))
        let received = Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: now))
        func send(_ event: EventInput) throws -> EventOutcome { try store.ingest([event], receivedAt: .fixed(received), on: connection)[0] }
        func click(_ ad: String, id: String = UUID().uuidString.lowercased(), snapshot: String?, position: Int32?, secondsAgo: Double) -> EventInput {
            EventInput(eventID: id, type: .click, sessionID: "s1", adID: ad,
                       occurredAt: Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: now.addingTimeInterval(-secondsAgo))),
                       snapshotID: snapshot, position: position)
        }
        #expect(try send(click("x", id: accepted, snapshot: nil, position: nil, secondsAgo: 0)) == .accepted)
        #expect(try send(click("y", id: duplicate, snapshot: nil, position: nil, secondsAgo: 0)) == .duplicate(.clickWithinWindow))
        #expect(try send(click("x", snapshot: "feed-1", position: 3, secondsAgo: 2400)) == .accepted)
        #expect(try send(click("y", snapshot: nil, position: 9, secondsAgo: 2400.5)) == .duplicate(.simultaneousClick))
        #expect(try send(click("x", snapshot: "feed-2", position: 8, secondsAgo: 300)) == .rejected(.staleSnapshot))
    }
}
