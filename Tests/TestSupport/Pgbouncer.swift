import Foundation

/// A real pgbouncer in transaction pooling mode in front of a PostgreSQL on this machine, for the
/// tests that must hold behind a pooler (API.md section 8). Started with the same shell function as
/// `scripts/chaos` (`scripts/lib/postgres.sh` `start_pgbouncer`, which installs pgbouncer when it is
/// missing and runs it as the `postgres` user); stopped when released.
public final class Pgbouncer: Sendable {
    /// The port pgbouncer listens on (127.0.0.1).
    public let port: Int
    private let directory: URL

    /// Starts pgbouncer in front of the PostgreSQL on 127.0.0.1:`targetPort`.
    public init(targetPort: Int) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("adtally-pgbouncer-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        port = try LoopbackPort.free()
        try DisposableCluster.shell("start_pgbouncer \"$1\" \"$2\" \"$3\"", directory.path, String(port), String(targetPort))
    }

    /// In front of the server that `connectionString` names (a URI with a port, as scripts/test's).
    public convenience init(inFrontOf connectionString: String) throws {
        guard let port = URLComponents(string: connectionString)?.port else {
            throw TestDatabaseError("pgbouncer needs a URI with a port, got \(connectionString)")
        }
        try self.init(targetPort: port)
    }

    deinit {
        try? DisposableCluster.shell("stop_pgbouncer \"$1\"", directory.path)
        try? FileManager.default.removeItem(at: directory)
    }

    /// A connection URI to `database` through pgbouncer.
    public func connectionString(database: String) -> String {
        "postgresql://postgres@127.0.0.1:\(port)/\(database)"
    }
}
