import Foundation
import Postgres
import Synchronization

/// A database of its own for one test, created on the server that `DATABASE_URL` names (the
/// throwaway cluster `scripts/test` starts). Tests that need PostgreSQL call `TestDatabase.create()`
/// and fail, never skip, when it cannot connect.
///
/// When `DATABASE_URL` names a Citus coordinator (its database has the `citus` extension and
/// worker nodes, as `scripts/check-citus` gives it), the new database is a Citus cluster of its
/// own on the same nodes: made on the coordinator and on every worker, with the extension, and the
/// workers added, so that migrations distribute the tables as they would in production.
public struct TestDatabase: Sendable {
    /// Connection string of the new, empty database.
    public let connectionString: String
    /// Its name.
    public let name: String

    /// The server's connection string from `DATABASE_URL`; throws a clear error when it is unset.
    public static func serverConnectionString() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw TestDatabaseError("DATABASE_URL is not set: run the tests through scripts/test, which starts PostgreSQL")
        }
        return url
    }

    /// Creates an empty database with a unique name.
    public static func create(prefix: String = "t") throws -> TestDatabase {
        let server = try serverConnectionString()
        let name = "adtally_\(prefix)_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        let admin = try PostgresConnection(connectionString: server)
        defer { admin.close() }
        // CREATE DATABASE takes no parameters; the name is generated above from hex digits only.
        try admin.execute("CREATE DATABASE \(name)")
        let database = TestDatabase(connectionString: withDatabase(server, name), name: name)
        if let nodes = try CitusNodes(on: admin) {
            try nodes.makeCluster(database: name, server: server)
        }
        return database
    }

    /// Opens a connection to this database.
    public func connect() throws -> PostgresConnection {
        try PostgresConnection(connectionString: connectionString)
    }

    /// This database on each worker of its Citus cluster, as connection strings (none on plain
    /// PostgreSQL): for tests that write through a worker.
    public func workerConnectionStrings() throws -> [String] {
        let connection = try connect()
        defer { connection.close() }
        guard let nodes = try CitusNodes(on: connection) else { return [] }
        return try nodes.workers.map { try CitusNodes.node(connectionString, $0, database: name) }
    }

    /// Replaces the database name of a URI or key/value connection string.
    public static func withDatabase(_ connectionString: String, _ database: String) -> String {
        if connectionString.hasPrefix("postgres://") || connectionString.hasPrefix("postgresql://"),
           var components = URLComponents(string: connectionString) {
            components.path = "/" + database
            if let url = components.string { return url }
        }
        // In key/value form a later keyword overrides an earlier one.
        return connectionString + " dbname=\(database)"
    }
}

/// The nodes of the Citus cluster a server connection is on: nil when it is plain PostgreSQL.
struct CitusNodes {
    let coordinator: (host: String, port: Int)
    let workers: [(host: String, port: Int)]

    init?(on connection: PostgresConnection) throws {
        guard try connection.query("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").first?.decode(Bool.self, at: 0) == true else {
            return nil
        }
        let rows = try connection.query("""
            SELECT nodename, nodeport, groupid = 0 FROM pg_dist_node WHERE noderole = 'primary' AND isactive ORDER BY groupid, nodeport
            """).rows
        var coordinator: (host: String, port: Int)?
        var workers: [(host: String, port: Int)] = []
        for row in rows {
            var columns = row.columns()
            let node = (host: try columns.next(String.self), port: try columns.next(Int.self))
            if try columns.next(Bool.self) { coordinator = node } else { workers.append(node) }
        }
        guard let coordinator, !workers.isEmpty else {
            throw TestDatabaseError("DATABASE_URL is a Citus database without a coordinator host and workers: "
                                    + "run citus_set_coordinator_host and citus_add_node on it first")
        }
        self.coordinator = coordinator
        self.workers = workers
    }

    /// One test database is made a cluster at a time: `citus_add_node` for two databases at once
    /// can fail on the worker with "tuple concurrently updated" (it updates objects every database
    /// of a node shares, such as roles), seen once in a check-citus run of 74 tests.
    private static let setup = Mutex(())

    /// Makes `database` (already created on the coordinator) a cluster on these nodes.
    func makeCluster(database: String, server: String) throws {
        try Self.setup.withLock { _ in try makeClusterAlone(database: database, server: server) }
    }

    private func makeClusterAlone(database: String, server: String) throws {
        for worker in workers {
            let admin = try PostgresConnection(connectionString: Self.node(server, worker, database: "postgres"))
            defer { admin.close() }
            // The name is generated from hex digits only (`create`).
            try admin.execute("CREATE DATABASE \(database)")
            let connection = try PostgresConnection(connectionString: Self.node(server, worker, database: database))
            defer { connection.close() }
            try connection.execute("CREATE EXTENSION citus")
        }
        let connection = try PostgresConnection(connectionString: TestDatabase.withDatabase(server, database))
        defer { connection.close() }
        // Four shards a table (two a worker) rather than 32: the migrations then take a second
        // rather than ten, and a batch of several sessions still spans shards and workers.
        try connection.execute("ALTER DATABASE \(database) SET citus.shard_count = 4")
        try connection.execute("CREATE EXTENSION citus")
        try connection.query("SELECT citus_set_coordinator_host($1, $2::int)", [coordinator.host, coordinator.port])
        for worker in workers {
            try connection.query("SELECT citus_add_node($1, $2::int)", [worker.host, worker.port])
        }
    }

    /// `server` with another host, port and database (the same user and options).
    static func node(_ server: String, _ node: (host: String, port: Int), database: String) throws -> String {
        if server.hasPrefix("postgres://") || server.hasPrefix("postgresql://"), var components = URLComponents(string: server) {
            components.host = node.host
            components.port = node.port
            components.path = "/" + database
            if let url = components.string { return url }
        }
        return server + " host=\(node.host) port=\(node.port) dbname=\(database)"
    }
}

/// A test set-up failure with a message that says what to do.
public struct TestDatabaseError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
