@testable import AdTally
import Foundation
import Postgres
import TestSupport
import Testing

/// Migration 0017 (issue 55): a database made today has today's partition from the first day, and
/// the one-row tables that open every report are estimated as what they are, so that no statement
/// of a report is compiled with JIT for a cost it does not have.
@Suite(.timeLimit(.minutes(5))) struct TodayPartitionMigrationTests {
    /// Each partition of events with its upper bound, as the schema reports it.
    static func partitions(_ connection: PostgresConnection) throws -> [String: String] {
        var result: [String: String] = [:]
        for row in try connection.query("SELECT name, coalesce(upper::text, 'none') FROM adtally_event_partitions()").rows {
            result[try row.decode(String.self, at: 0)] = try row.decode(String.self, at: 1)
        }
        return result
    }

    static func todayStart(_ connection: PostgresConnection) throws -> String {
        try connection.query("SELECT (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::text").first?.decode(String.self, at: 0) ?? ""
    }

    @Test func aDatabaseMadeTodayStoresTodaysEventsInTodaysPartition() throws {
        let connection = try TestDatabase.create().connect()
        guard try !CitusDistributionTests.isCitus(connection) else { return }  // partitions are not moved on Citus (the migration says why)
        try MigrationRunner(migrations: try MigrationRunnerTests.projectMigrations()).apply(on: connection)
        let partitions = try Self.partitions(connection)
        let today = try connection.query("SELECT 'events_p' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')").first?.decode(String.self, at: 0) ?? ""
        #expect(partitions["events_legacy"] == (try Self.todayStart(connection)))
        #expect(partitions[today] != nil, "\(partitions)")
        // An event received now lands in today's partition, one of yesterday in events_legacy.
        try connection.execute("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, occurred_at, received_at)
            VALUES ('s-now', gen_random_uuid(), 'impression', 'ad-1', 'accepted', now(), now()),
                   ('s-then', gen_random_uuid(), 'impression', 'ad-1', 'accepted', now() - interval '1 day', now() - interval '1 day')
            """)
        let homes = try connection.query("SELECT session_id, tableoid::regclass::text FROM events ORDER BY 1").rows
            .map { "\(try $0.decode(String.self, at: 0))=\(try $0.decode(String.self, at: 1))" }
        #expect(homes == ["s-now=\(today)", "s-then=events_legacy"])
    }

    @Test func aDatabaseWithEventsInItsFirstPartitionIsLeftAsItIs() throws {
        let connection = try TestDatabase.create().connect()
        guard try !CitusDistributionTests.isCitus(connection) else { return }
        let migrations = try MigrationRunnerTests.projectMigrations()
        try MigrationRunner(migrations: migrations.filter { $0.version < 17 }).apply(on: connection)
        try connection.execute("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, occurred_at, received_at)
            VALUES ('s-now', gen_random_uuid(), 'impression', 'ad-1', 'accepted', now(), now())
            """)
        let before = try Self.partitions(connection)
        #expect(before["events_legacy"] != (try Self.todayStart(connection)), "0005 ends events_legacy at the end of today")
        try MigrationRunner(migrations: migrations).apply(on: connection)
        #expect(try Self.partitions(connection) == before)
        #expect(try connection.query("SELECT count(*) FROM events_legacy").first?.decode(Int.self, at: 0) == 1)
    }

    @Test func theStatementsThatOpenAReportAreEstimatedBelowJITsThreshold() throws {
        let connection = try TestDatabase.create().connect()
        try MigrationRunner(migrations: try MigrationRunnerTests.projectMigrations()).apply(on: connection)
        let threshold = try connection.query("SELECT current_setting('jit_above_cost')::float8").first?.decode(Double.self, at: 0) ?? 0
        for query in [LifecycleState.rollupStateQuery, LifecycleState.phasesQuery, LifecycleState.finalBeforeQuery] {
            let explain: PostgresQuery = "EXPLAIN \(query)"
            let plan = try connection.query(explain).rows.compactMap { $0.rawText(at: 0) }.joined(separator: "\n")
            // The top node's "cost=startup..total".
            let cost = plan.firstMatch(of: /cost=[0-9.]+\.\.([0-9.]+)/).flatMap { Double($0.1) } ?? .infinity
            #expect(cost < threshold / 10, "estimated \(cost) against jit_above_cost \(threshold): \(plan.prefix(400))")
        }
    }
}
