@testable import AdTally
import Postgres
import TestSupport
import Testing

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
        ("event_ids", "session_id", "sessions"),
        ("snapshot_owners", "snapshot_id", "snapshot_owners"),
        ("ad_hourly_counts", "ad_id", "ad_hourly_counts"),
        ("ad_daily_counts", "ad_id", "ad_hourly_counts"),
        ("ad_quarter_counts", "ad_id", "ad_hourly_counts"),
        ("ad_day_counts", "ad_id", "ad_hourly_counts"),
        // API 1.5: the advertiser keys and the secret of session_ref, small and read on every node.
        ("advertiser_keys", nil, "ads"),
        ("advertiser_key_changes", nil, "ads"),
        ("adtally_secrets", nil, "ads"),
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
        #expect(Set(Self.expected.map(\.colocatedWith)).count == 4)
        // Left on the coordinator as plain tables (docs/SCALING.md says why); schema_migrations is
        // a reference table, read on every node.
        for table in ["lifecycle_state", "rollup_day_phases", "published_final_before"] {
            #expect(try Self.distribution(table, on: connection) == nil, "\(table)")
        }
        #expect(try Self.distribution("schema_migrations", on: connection)?.column == "")
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

    /// The number of two-phase commits recorded on every node of the cluster (Citus keeps a row
    /// per prepared transaction in pg_dist_transaction until its recovery cleans it).
    static func twoPhaseCommits(_ connections: [PostgresConnection]) throws -> Int {
        try connections.reduce(0) { $0 + (try $1.query("SELECT count(*) FROM pg_dist_transaction").first?.decode(Int.self, at: 0) ?? 0) }
    }

    /// Issue 32: a transaction that stores one session's events is one shard's, no two-phase commit,
    /// through the coordinator and through a worker; a batch of several sessions still stores
    /// everything (over their shards).
    @Test func oneSessionsEventsAreAOneShardTransactionThroughAnyNode() throws {
        let fixture = try StoreFixture()
        guard try Self.isCitus(fixture.connection) else { return }
        #expect(try DatabaseNode.detect(on: fixture.connection) == .citusCoordinator)
        let workers = try fixture.database.workerConnectionStrings().map { try PostgresConnection(connectionString: $0) }
        defer { workers.forEach { $0.close() } }
        let worker = try #require(workers.first)
        #expect(try DatabaseNode.detect(on: worker) == .citusWorker)
        try fixture.feed("s1", "snap-1", (1...60).map { StoreFixture.ad("ad-\($0)", Int32($0)) })
        try fixture.connection.execute("SELECT recover_prepared_transactions()")
        let nodes = [fixture.connection] + workers
        let before = try Self.twoPhaseCommits(nodes)
        let batch = (1...50).map { StoreFixture.event($0 % 5 == 0 ? .click : .impression, "s1", "ad-\($0)") }
        let outcomes = try fixture.send(batch)
        #expect(outcomes.allSatisfy { $0.status == .accepted })
        // A session without a feed (its events are stored, rejected), and single events, through a worker.
        _ = try fixture.events.ingest((1...7).map { StoreFixture.event(.impression, "nobody", "ad-\($0)") },
                                      receivedAt: .fixed(fixture.clock.now()), on: worker)
        _ = try fixture.events.ingest([StoreFixture.event(.impression, "s1", "ad-51")], receivedAt: .fixed(fixture.clock.now()), on: worker)
        _ = try fixture.events.ingest([StoreFixture.event(.click, "s1", "ad-51")], receivedAt: .fixed(fixture.clock.now()), on: worker)
        #expect(try Self.twoPhaseCommits(nodes) <= before)
        // The store's call (migration 0013) is delegated, inside the transaction, to the node of the
        // session's shard (the coordinator holds none): one task there, whose inserts run on that node.
        let call = EventStore.storeSession([StoredEvent(event: StoreFixture.event(.impression, "s1", "ad-1"), outcome: .accepted)][...],
                                           receivedAt: fixture.clock.now())
        try fixture.connection.execute("BEGIN")
        let plan = try fixture.connection.query(PostgresQuery(unsafeRawSQL: "EXPLAIN (COSTS OFF) " + call.sql, binds: call.binds)).rows
            .map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
        try fixture.connection.execute("ROLLBACK")
        #expect(plan.contains("Custom Scan (Citus Adaptive)") && plan.contains("Task Count: 1"), "\(plan)")
        #expect(try fixture.count("SELECT count(*) FROM events") == 59)
        #expect(try fixture.count("SELECT count(*) FROM event_ids") == 59)
        // Replays through either node get the same answers.
        #expect(try fixture.events.ingest(batch, receivedAt: .fixed(fixture.clock.now()), on: worker) == outcomes)
    }

    /// Migration 0011: a batch open on a worker holds final_before back on the coordinator (and
    /// the other way round), as one open on the node itself does.
    @Test func finalBeforeHoldsForABatchOpenOnAnyNode() throws {
        let database = try TestDatabase.create()
        let connection = try database.connect()
        try MigrationRunner(migrations: try MigrationRunnerTests.projectMigrations()).apply(on: connection)
        let held = "2020-01-01 00:00:00+00"
        let readers = [connection] + (try database.workerConnectionStrings().map { try PostgresConnection(connectionString: $0) })
        defer { readers.dropFirst().forEach { $0.close() } }
        let opener = try database.connect()
        defer { opener.close() }
        for batchNode in [connection] + readers.dropFirst().prefix(1) {
            let open = batchNode === connection ? opener : batchNode
            try open.execute("BEGIN")
            _ = try open.query("SELECT adtally_begin_batch($1::timestamptz)", [held])
            for reader in readers where reader !== open {
                #expect(try reader.query("SELECT adtally_final_before() = $1::timestamptz", [held]).first?.decode(Bool.self, at: 0) == true)
            }
            try open.execute("ROLLBACK")
            for reader in readers {
                #expect(try reader.query("SELECT adtally_final_before() > now() - interval '1 minute'").first?.decode(Bool.self, at: 0) == true)
            }
        }
    }
}
