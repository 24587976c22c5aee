import Postgres

/// What kind of server a connection reached: plain PostgreSQL, or a node of a Citus cluster
/// (docs/SCALING.md). Read once at start-up; it decides how group commit groups requests and what a
/// process may do through that node.
public enum DatabaseNode: Sendable, Equatable {
    /// PostgreSQL without the `citus` extension.
    case plain
    /// The coordinator of a Citus cluster (or a Citus database without workers): migrations,
    /// maintenance, reports and events all go through it.
    case citusCoordinator
    /// A Citus worker, which routes a process's events to their shards as the coordinator would
    /// (Citus 11 and later sync the metadata to every node). Migrations, maintenance and reports go
    /// through the coordinator: DDL on distributed tables is the coordinator's, and the lifecycle
    /// state lives there.
    case citusWorker

    /// Whether the database is a Citus cluster: one transaction stores one session's events, so
    /// that it is a one-shard transaction (`EventIngestor`).
    public var isCitus: Bool { self != .plain }

    /// Asks the server. `pg_dist_local_group` exists only with the extension; its group is 0 on the
    /// coordinator.
    public static func detect(on connection: PostgresConnection) throws -> DatabaseNode {
        let citus = try connection.query("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").first?.decode(Bool.self, at: 0) ?? false
        guard citus else { return .plain }
        let group = try connection.query("SELECT groupid FROM pg_dist_local_group").first?.decode(Int.self, at: 0) ?? 0
        return group == 0 ? .citusCoordinator : .citusWorker
    }
}
