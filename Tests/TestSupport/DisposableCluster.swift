import Foundation

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
    public init() throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("adtally-cluster-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        directory = parent.appendingPathComponent("pg")
        port = try LoopbackPort.free()
        connectionString = "postgresql://postgres@127.0.0.1:\(port)/adtally"
        try start()
    }

    deinit {
        try? stop()
        try? FileManager.default.removeItem(at: directory.deletingLastPathComponent())
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
    private static func shell(_ script: String, _ arguments: String...) throws {
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
