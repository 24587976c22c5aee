import AdTally
import Dispatch
import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(5))) struct MigrationRunnerTests {
    /// The project's real migrations, from the source tree.
    static func projectMigrations() throws -> [Migration] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        return try Migration.load(from: root.appendingPathComponent("migrations"))
    }

    static func temporaryFolder(_ files: [String: String]) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("adtally-mig-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (name, text) in files {
            try Data(text.utf8).write(to: folder.appendingPathComponent(name))
        }
        return folder
    }

    @Test func projectMigrationsApplyOnceAndCreateTheSchema() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let runner = MigrationRunner(migrations: try Self.projectMigrations())
        #expect(!runner.migrations.isEmpty)
        let first = try runner.apply(on: connection)
        #expect(first.applied == runner.migrations.map(\.fileName))
        let second = try runner.apply(on: connection)
        #expect(second.applied.isEmpty)
        #expect(try runner.pendingVersions(on: connection).isEmpty)
        let rows = try connection.query("SELECT count(*) FROM schema_migrations").first?.decode(Int.self, at: 0)
        #expect(rows == runner.migrations.count)
        for table in ["ads", "sessions", "snapshots", "snapshot_ads", "snapshot_owners", "events", "event_ids", "session_ads"] {
            let exists = try connection.query("SELECT to_regclass($1) IS NOT NULL", [table]).first?.decode(Bool.self, at: 0)
            #expect(exists == true, "table \(table)")
        }
    }

    @Test func everySessionTableKeysOnSessionID() throws {
        // DESIGN.md: every primary key and unique constraint of a session's row includes session_id.
        let connection = try TestDatabase.create().connect()
        try MigrationRunner(migrations: try Self.projectMigrations()).apply(on: connection)
        let rows = try connection.query("""
            SELECT c.conrelid::regclass::text, c.conname
            FROM pg_constraint c
            WHERE c.contype IN ('p', 'u')
              AND c.connamespace = 'public'::regnamespace
              AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attname = 'session_id')
              AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attname = 'session_id'
                              AND a.attnum = ANY (c.conkey))
              AND c.conrelid::regclass::text NOT IN ('snapshot_owners', 'event_ids')
            """).rows
        #expect(rows.isEmpty, "constraints without session_id: \(rows.compactMap { $0.rawText(at: 1) })")
    }

    @Test func twoRunnersRacingApplyOnce() throws {
        let db = try TestDatabase.create()
        let migrations = try Self.projectMigrations()
        let failures = Mutex<[String]>([])
        let appliedCounts = Mutex<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do {
                let connection = try db.connect()
                let report = try MigrationRunner(migrations: migrations).apply(on: connection)
                appliedCounts.withLock { $0.append(report.applied.count) }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        // Each migration was applied by exactly one runner. Runners take the (transaction-level)
        // lock once per migration, so they may share the work, but each applies a migration only
        // after finding every earlier one recorded, so the order holds.
        #expect(appliedCounts.withLock { $0 }.reduce(0, +) == migrations.count)
        let connection = try db.connect()
        let order = try connection.query("SELECT version FROM schema_migrations ORDER BY applied_at, version").rows
            .map { try $0.decode(Int.self, at: 0) }
        #expect(order == migrations.map(\.version))
        let rows = try connection.query("SELECT version, count(*) FROM schema_migrations GROUP BY version HAVING count(*) > 1").rows
        #expect(rows.isEmpty)
        #expect(try connection.query("SELECT count(*) FROM schema_migrations").first?.decode(Int.self, at: 0) == migrations.count)
    }

    @Test func changedMigrationIsRefusedByName() throws {
        let db = try TestDatabase.create()
        let connection = try db.connect()
        let original = try Self.temporaryFolder([
            "0001_first.sql": "CREATE TABLE a (id int);",
            "0002_second.sql": "CREATE TABLE b (id int);",
        ])
        defer { try? FileManager.default.removeItem(at: original) }
        try MigrationRunner(migrations: try Migration.load(from: original)).apply(on: connection)
        let edited = try Self.temporaryFolder([
            "0001_first.sql": "CREATE TABLE a (id bigint);",
            "0002_second.sql": "CREATE TABLE b (id int);",
            "0003_third.sql": "CREATE TABLE c (id int);",
        ])
        defer { try? FileManager.default.removeItem(at: edited) }
        let error = #expect(throws: MigrationError.self) {
            try MigrationRunner(migrations: try Migration.load(from: edited)).apply(on: connection)
        }
        guard case .checksumMismatch(let fileName, _, _) = error else {
            Issue.record("expected checksumMismatch, got \(String(describing: error))")
            return
        }
        #expect(fileName == "0001_first.sql")
        #expect(error?.description.contains("0001_first.sql") == true)
        // Nothing after the refusal was applied.
        #expect(try connection.query("SELECT to_regclass('c') IS NULL").first?.decode(Bool.self, at: 0) == true)
    }

    /// A migration corrected after a release lists the checksum of the text it replaced: a
    /// database that applied that text is accepted and its record takes the new checksum; a
    /// database that applied any other text is still refused.
    @Test func aCorrectedMigrationAcceptsTheTextItListsAndNoOther() throws {
        let first = "CREATE TABLE a (id int, b int);"
        let second = "CREATE TABLE b (id int);"
        func sha(_ text: String, _ connection: PostgresConnection) throws -> String {
            try #require(try connection.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", [text]).first?.decode(String.self, at: 0))
        }
        let connection = try TestDatabase.create().connect()
        let original = try Self.temporaryFolder(["0001_first.sql": first, "0002_second.sql": second])
        defer { try? FileManager.default.removeItem(at: original) }
        try MigrationRunner(migrations: try Migration.load(from: original)).apply(on: connection)

        let correctedText = "-- adtally: earlier checksum \(try sha(first, connection))\nCREATE TABLE a (id int);\nALTER TABLE a ADD COLUMN b int;"
        let corrected = try Self.temporaryFolder(["0001_first.sql": correctedText, "0002_second.sql": second])
        defer { try? FileManager.default.removeItem(at: corrected) }
        let report = try MigrationRunner(migrations: try Migration.load(from: corrected)).apply(on: connection)
        #expect(report.corrected == ["0001_first.sql"])
        #expect(report.applied.isEmpty, "nothing is applied again")
        let recorded = try connection.query("SELECT checksum FROM schema_migrations WHERE version = 1").first?.decode(String.self, at: 0)
        #expect(recorded == (try sha(correctedText, connection)))
        #expect(try MigrationRunner(migrations: try Migration.load(from: corrected)).apply(on: connection).corrected.isEmpty)

        // Another database applied a text the correction does not list.
        let other = try TestDatabase.create().connect()
        let edited = try Self.temporaryFolder(["0001_first.sql": "CREATE TABLE a (id bigint, b int);"])
        defer { try? FileManager.default.removeItem(at: edited) }
        try MigrationRunner(migrations: try Migration.load(from: edited)).apply(on: other)
        let error = #expect(throws: MigrationError.self) {
            try MigrationRunner(migrations: try Migration.load(from: corrected)).apply(on: other)
        }
        guard case .checksumMismatch(let fileName, _, _) = error else {
            Issue.record("expected checksumMismatch, got \(String(describing: error))")
            return
        }
        #expect(fileName == "0001_first.sql")
    }

    @Test func failingMigrationLeavesNoTraceAndNamesTheFile() throws {
        let connection = try TestDatabase.create().connect()
        let folder = try Self.temporaryFolder([
            "0001_good.sql": "CREATE TABLE good (id int);",
            "0002_bad.sql": "CREATE TABLE half (id int); SELECT * FROM no_such_table;",
        ])
        defer { try? FileManager.default.removeItem(at: folder) }
        let error = #expect(throws: MigrationError.self) {
            try MigrationRunner(migrations: try Migration.load(from: folder)).apply(on: connection)
        }
        #expect(error?.description.contains("0002_bad.sql") == true)
        #expect(try connection.query("SELECT to_regclass('good') IS NOT NULL").first?.decode(Bool.self, at: 0) == true)
        #expect(try connection.query("SELECT to_regclass('half') IS NULL").first?.decode(Bool.self, at: 0) == true)
        #expect(try connection.query("SELECT array_agg(version ORDER BY version)::text FROM schema_migrations").first?.decode(String.self, at: 0) == "{1}")
    }

    @Test func badFileNamesAndDuplicateVersionsAreRefused() throws {
        let badName = try Self.temporaryFolder(["first.sql": "SELECT 1;"])
        defer { try? FileManager.default.removeItem(at: badName) }
        #expect(throws: MigrationError.badFileName("first.sql")) { try Migration.load(from: badName) }
        let duplicate = try Self.temporaryFolder(["0001_a.sql": "SELECT 1;", "0001_b.sql": "SELECT 2;"])
        defer { try? FileManager.default.removeItem(at: duplicate) }
        #expect(throws: MigrationError.self) { try Migration.load(from: duplicate) }
        let ordered = try Self.temporaryFolder(["0010_ten.sql": "SELECT 10;", "0002_two.sql": "SELECT 2;", "README.md": "not sql"])
        defer { try? FileManager.default.removeItem(at: ordered) }
        #expect(try Migration.load(from: ordered).map(\.version) == [2, 10])
    }
}
