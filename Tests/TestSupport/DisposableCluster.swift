import Foundation
import Postgres

/// A PostgreSQL cluster of a test's own, for tests that stop and start the database (readiness,
/// outages). It uses the same shell functions as `scripts/test` (`scripts/lib/postgres.sh`), so it
/// runs the server as the `postgres` user when the tests run as root.
public final class DisposableCluster: Sendable {
    /// Connection URI of the cluster's `adtally` database.
    public let connectionString: String
    public let port: Int
    private let directory: URL
    private static let library = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/lib/postgres.sh")

    /// Initialises and starts a cluster on a free loopback port.
    public convenience init() throws {
        try self.init(standbyOf: nil, settings: [])
    }

    /// A new cluster, or (with `primary`) a hot standby of it copied with `pg_basebackup` that
    /// streams from it; `settings` are extra `postgresql.conf` lines of a standby.
    private init(standbyOf primary: DisposableCluster?, settings: [String]) throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("adtally-cluster-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        directory = parent.appendingPathComponent("pg")
        port = try LoopbackPort.free()
        connectionString = "postgresql://postgres@127.0.0.1:\(port)/adtally"
        if let primary {
            try Self.shell("start_standby \"$1\" \"$2\" \"$3\" no \"$4\" >/dev/null", String(primary.port), directory.path, String(port),
                           settings.joined(separator: "\n"))
        } else {
            try start()
        }
    }

    deinit {
        // A paused server cannot stop: let it run first.
        try? signal("CONT")
        try? stop()
        try? FileManager.default.removeItem(at: directory.deletingLastPathComponent())
    }

    /// What the server has written to its log so far (`server.log`: PostgreSQL's own messages,
    /// `ERROR` lines among them).
    public func serverLog() throws -> String {
        try String(contentsOf: directory.appendingPathComponent("server.log"), encoding: .utf8)
    }

    /// A hot standby of this cluster, streaming from it, on a port of its own. `settings` are
    /// extra `postgresql.conf` lines for it (`max_standby_streaming_delay = 0`).
    public func makeStandby(settings: [String] = []) throws -> DisposableCluster {
        try DisposableCluster(standbyOf: self, settings: settings)
    }

    /// Returns once `standby` has replayed everything written here so far (throws after `seconds`).
    /// The target is the WAL insert position: with `synchronous_commit = off` (these clusters are
    /// throwaway ones) the write position lags behind what was committed.
    public func waitUntilReplayed(by standby: DisposableCluster, seconds: Double = 15) throws {
        let here = try PostgresConnection(connectionString: connectionString)
        defer { here.close() }
        guard let lsn = try here.query("SELECT pg_current_wal_insert_lsn()::text").first?.decode(String.self, at: 0) else {
            throw TestDatabaseError("no WAL position")
        }
        let there = try PostgresConnection(connectionString: standby.connectionString)
        defer { there.close() }
        let deadline = Date() + seconds
        while Date() < deadline {
            if try there.query("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", [lsn]).first?.decode(Bool?.self, at: 0) == true { return }
            usleep(50_000)
        }
        throw TestDatabaseError("the standby did not replay \(lsn) within \(seconds) s")
    }

    /// Ends a standby's recovery; returns once it accepts writes.
    public func promote() throws {
        try Self.shell("promote_cluster \"$1\"", directory.path)
    }

    /// `synchronous_standby_names` on this primary (`*`: every commit waits for a standby).
    public func setSynchronousStandby(_ names: String) throws {
        try Self.shell("set_synchronous_standby \"$1\" \"$2\"", String(port), names)
    }

    /// Sends `name` (`KILL`, `STOP`, `CONT`) to every process of the server: a crash, a freeze, a thaw.
    public func signal(_ name: String) throws {
        try Self.shell("signal_cluster \"$1\" \"$2\"", directory.path, name)
    }

    /// Starts the server (again); returns when it accepts connections.
    public func start() throws {
        try Self.shell("start_cluster \"$1\" \"$2\" no >/dev/null", directory.path, String(port))
    }

    /// Stops the server (fast shutdown: open sessions are ended).
    public func stop() throws {
        try Self.shell("stop_cluster \"$1\"", directory.path)
    }

    /// Runs a script with `posix_spawn` and `waitpid`: `Foundation.Process.waitUntilExit` can miss
    /// a child's exit when called off the main thread, and these calls come from test threads.
    static func shell(_ script: String, _ arguments: String...) throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("adtally-cluster-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let argv = ["/bin/bash", "-c", ". \"\(library.path)\"; \(script) >\"$0.out\" 2>&1", log.path] + arguments
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/bash", nil, nil, &cArguments, environ)
        guard spawned == 0 else { throw TestDatabaseError("posix_spawn failed: \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let exitCode = (status >> 8) & 0xff
        guard status & 0x7f == 0, exitCode == 0 else {
            let text = (try? String(contentsOfFile: log.path + ".out", encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(atPath: log.path + ".out")
            throw TestDatabaseError("cluster command failed (status \(status)): \(script): \(text)")
        }
        try? FileManager.default.removeItem(atPath: log.path + ".out")
    }
}
