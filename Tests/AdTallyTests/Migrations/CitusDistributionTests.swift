import AdTally
import Postgres
import Testing
import TestSupport

/// Migration 0006 (docs/SCALING.md): on a Citus coordinator the schema distributes itself; on plain
/// PostgreSQL it does nothing extra. `scripts/test` runs the plain half; `scripts/check-citus`
/// runs this suite against a coordinator, where the Citus half runs.
@Suite(.timeLimit(.minutes(5))) struct CitusDistributionTests {
    /// Every table of the schema and how it is distributed: the distribution column (nil for a
    /// reference table), and the table whose colocation group it joins (itself for a group's first).
    static let expected: [(table: String, column: String?, colocatedWith: String)] = [
        ("ads", nil, "ads"),
        ("sessions", "session_id", "sessions"),
        ("snapshots", "session_id", "sessions"),
        ("snapshot_ads", "session_id", "sessions"),
        ("session_ads", "session_id", "sessions"),
        ("events", "session_id", "sessions"),
        ("event_ids", "event_id", "event_ids"),
        ("snapshot_owners", "snapshot_id", "snapshot_owners"),
        ("ad_hourly_counts", "ad_id", "ad_hourly_counts"),
        ("ad_daily_counts", "ad_id", "ad_hourly_counts"),
        ("ad_quarter_counts", "ad_id", "ad_hourly_counts"),
        ("ad_day_counts", "ad_id", "ad_hourly_counts"),
    ]

    static func isCitus(_ connection: PostgresConnection) throws -> Bool {
        try connection.query("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").first?.decode(Bool.self, at: 0) ?? false
    }

    /// The distribution column of `table` ("" for a reference table), and its colocation group; nil when Citus does not know it.
    static func distribution(_ table: String, on connection: PostgresConnection) throws -> (column: String, group: Int)? {
        guard let row = try connection.query("""
            SELECT coalesce(column_to_column_name(logicalrelid, partkey), ''), colocationid
            FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)
            """, [table]).first else { return nil }
        return (try row.decode(String.self, at: 0), try row.decode(Int.self, at: 1))
    }

    @Test func migrationsDistributeEveryTableOnCitusAndNothingElsewhere() throws {
        let connection = try TestDatabase.create().connect()
        try MigrationRunner(migrations: try MigrationRunnerTests.projectMigrations()).apply(on: connection)
        guard try Self.isCitus(connection) else {
            // Plain PostgreSQL: the function exists and does nothing.
            #expect(try connection.query("SELECT adtally_distribute('sessions', 'session_id')").first?.decode(Bool.self, at: 0) == false)
            #expect(try connection.query("SELECT to_regclass('pg_dist_partition') IS NULL").first?.decode(Bool.self, at: 0) == true)
            return
        }
        var groups: [String: Int] = [:]
        for entry in Self.expected {
            let found = try #require(try Self.distribution(entry.table, on: connection), "\(entry.table) is not distributed")
            #expect(found.column == (entry.column ?? ""), "\(entry.table)")
            groups[entry.table] = found.group
        }
        for entry in Self.expected {
            #expect(groups[entry.table] == groups[entry.colocatedWith], "\(entry.table) colocated with \(entry.colocatedWith)")
        }
        #expect(Set(Self.expected.map(\.colocatedWith)).count == 5)
        // Left on the coordinator as plain tables (docs/SCALING.md says why).
        for table in ["lifecycle_state", "schema_migrations", "rollup_day_phases", "published_final_before"] {
            #expect(try Self.distribution(table, on: connection) == nil, "\(table)")
        }
        // Running it again changes nothing.
        #expect(try connection.query("SELECT adtally_distribute('sessions', 'session_id')").first?.decode(Bool.self, at: 0) == false)

        // Every partition of events is distributed with it, including one attached later.
        #expect(try connection.query("SELECT adtally_create_event_partition(current_date + 30)").first?.decode(Bool.self, at: 0) == true)
        let partitions = try connection.query("SELECT name FROM adtally_event_partitions()").rows.map { try $0.decode(String.self, at: 0) }
        #expect(partitions.count >= 9)
        for partition in partitions {
            let found = try Self.distribution(partition, on: connection)
            #expect(found?.column == "session_id" && found?.group == groups["sessions"], "partition \(partition)")
        }
    }
}
