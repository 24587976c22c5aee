import AdTally
import Foundation
import Postgres
import TestSupport
import Testing

/// Migration 0014 was corrected after its release: its first text made the raw events' session
/// index a btree, its text now a hash index (cheaper per stored event), and 0015 replaces a btree
/// left by the first text. Both ways end in one schema.
@Suite(.timeLimit(.minutes(5))) struct SessionIndexMigrationTests {
    /// The access method of `events_session_idx` and of each partition's index attached to it.
    static func accessMethods(_ connection: PostgresConnection) throws -> Set<String> {
        let rows = try connection.query("""
            SELECT am.amname FROM pg_class i JOIN pg_am am ON am.oid = i.relam
            WHERE i.oid = 'events_session_idx'::regclass
               OR i.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events_session_idx'::regclass)
            """).rows
        return Set(try rows.map { try $0.decode(String.self, at: 0) })
    }

    @Test func freshDatabaseGetsTheHashIndex() throws {
        let connection = try TestDatabase.create().connect()
        try MigrationRunner(migrations: try MigrationRunnerTests.projectMigrations()).apply(on: connection)
        #expect(try Self.accessMethods(connection) == ["hash"])
    }

    @Test func databaseThatAppliedTheFirstTextIsAcceptedAndGetsTheHashIndex() throws {
        let migrations = try MigrationRunnerTests.projectMigrations()
        guard let corrected = migrations.first(where: { $0.version == 14 }) else {
            Issue.record("no migration 0014")
            return
        }
        // The first text: the btree, without the lines the correction put between the index's
        // first comment line and the index.
        var lines = corrected.sql.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let hashIndex = "CREATE INDEX IF NOT EXISTS events_session_idx ON events USING hash (session_id);"
        guard let note = lines.firstIndex(where: { $0.hasPrefix("-- IF NOT EXISTS: an operator may have built it ahead") }),
              let index = lines.firstIndex(of: hashIndex), note < index else {
            Issue.record("0014 no longer reads as this test expects")
            return
        }
        lines.replaceSubrange(note + 1...index, with: ["CREATE INDEX IF NOT EXISTS events_session_idx ON events (session_id);"])
        let firstText = lines.joined(separator: "\n")
        #expect(firstText != corrected.sql)
        let connection = try TestDatabase.create().connect()
        // The checksum the correction lists is that of a text that makes the btree.
        let firstChecksum = try connection.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", [firstText]).first?.decode(String.self, at: 0)
        let listed = try #require(corrected.earlierChecksums.first)

        let before = try MigrationRunnerTests.temporaryFolder(Dictionary(uniqueKeysWithValues: migrations.filter { $0.version <= 14 }.map {
            ($0.fileName, $0.version == 14 ? firstText : $0.sql)
        }))
        defer { try? FileManager.default.removeItem(at: before) }
        try MigrationRunner(migrations: try Migration.load(from: before)).apply(on: connection)
        #expect(try Self.accessMethods(connection) == ["btree"])
        // Events stored meanwhile are found by the new index too.
        try connection.execute("SELECT adtally_create_event_partition(current_date)")
        try connection.execute("""
            INSERT INTO events (event_id, session_id, type, ad_id, occurred_at, received_at, status)
            VALUES (gen_random_uuid(), 'session-a', 'impression', 'ad-1', now(), now(), 'accepted')
            """)

        let report = try MigrationRunner(migrations: migrations).apply(on: connection)
        if firstChecksum == listed {
            #expect(report.corrected == [corrected.fileName])
        } else {
            Issue.record("0014 lists \(listed), the first text (as rebuilt here) is \(firstChecksum ?? "nil")")
        }
        #expect(report.applied.contains { $0.hasPrefix("0015_") })
        #expect(try Self.accessMethods(connection) == ["hash"])
        try connection.execute("SET enable_seqscan = off")
        let found = try connection.query("SELECT count(*) FROM events WHERE session_id = 'session-a'").first?.decode(Int.self, at: 0)
        #expect(found == 1)
    }
}
