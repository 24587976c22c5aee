import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension EndToEnd {
    /// `scripts/run` as a newcomer meets it: its PostgreSQL must be stopped however the run ends,
    /// and a cluster directory left behind by an unclean end must start again by itself. Each run
    /// uses a data directory of its own (`ADTALLY_DATA_DIR`) and the debug binary
    /// (`ADTALLY_BINARY`, so no release build), and every run is bounded in time.
    @Suite(.timeLimit(.minutes(10))) struct RunScript {
        /// A temporary data directory for scripts/run; on release it stops whatever cluster is
        /// still running there and deletes it.
        final class Sandbox {
            let root: URL
            var dataRoot: URL { root.appendingPathComponent("data") }
            var cluster: URL { dataRoot.appendingPathComponent("postgres") }
            var pidFile: URL { cluster.appendingPathComponent("data/postmaster.pid") }

            init() throws {
                root = FileManager.default.temporaryDirectory.appendingPathComponent("adtally-run-\(UUID().uuidString.prefix(8))")
                // Reachable by the postgres user when the tests run as root.
                try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o755])
            }

            deinit {
                _ = try? RunScript.bash(". scripts/lib/postgres.sh; stop_cluster \"$1\"", cluster.path)
                try? FileManager.default.removeItem(at: root)
            }

            /// Starts scripts/run on `port`; the caller stops it.
            func run(port: Int) throws -> ScriptProcess {
                let environment = ChildProcess.environment([
                    "PORT": String(port), "ADTALLY_DATA_DIR": dataRoot.path, "ADTALLY_BINARY": Paths.binary.path,
                    "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path,
                ])
                return try ScriptProcess(script: "run", environment: environment)
            }

            /// Whether a PostgreSQL server still runs in the cluster: its pid file, or any process
            /// working in its data directory (a postmaster and its children chdir there).
            var clusterRunning: Bool {
                if FileManager.default.fileExists(atPath: pidFile.path) { return true }
                let data = cluster.appendingPathComponent("data").resolvingSymlinksInPath().path
                let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
                return processes.contains { name in
                    guard Int(name) != nil else { return false }
                    return (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(name)/cwd")) == data
                }
            }
        }

        /// Runs `bash -c script` from the repository root with `arguments` as $1...; its output.
        static func bash(_ script: String, _ arguments: String...) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", script, "bash"] + arguments
            process.currentDirectoryURL = Paths.repositoryRoot
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            let done = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in done.signal() }
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            if done.wait(timeout: .now() + 60) == .timedOut { process.terminate() }
            return text
        }

        /// Waits for the announcement (at most `timeout`), checks what it says and that the server
        /// answers, then stops the run as Ctrl-C does and checks that its cluster stopped too.
        static func expectServesThenStopsOnCtrlC(_ run: ScriptProcess, port: Int, _ sandbox: Sandbox,
                                                 timeout: TimeInterval = 120) throws {
            // The announcement ends with the "try: curl" line.
            let announced = run.stderr.wait(until: Date() + timeout) { text in
                text.contains("try: curl -s") ? text.split(separator: "\n").first { $0.contains("AdTally at http://") }.map(String.init) : nil
            }
            let line = try #require(announced, "no announcement (status \(String(describing: run.wait(timeout: 0)))); stderr: \(run.stderr.text.suffix(2000)) stdout: \(run.stdout.text.suffix(1000))")
            #expect(line.contains("http://127.0.0.1:\(port) "), "\(line)")
            #expect(line.contains("admin token: dev-admin-token"), "\(line)")
            // Announced only after the server said it listens: it answers at once.
            #expect(try HTTPClient.request(port: port, method: "GET", path: "/healthz").status == 200)
            // Standard output has its own pipe and reader: the log line the announcement followed may
            // reach it a moment after the announcement reached standard error.
            let listening = run.stdout.wait(until: Date() + 10) { text in
                text.split(separator: "\n").first { $0.contains(#""msg":"listening""#) }.map(String.init)
            }
            #expect(listening?.contains(#""host":"127.0.0.1""#) == true, "a development server listens on loopback only: \(listening ?? "")")
            let text = run.stderr.text
            #expect(text.contains("DATABASE_URL=postgresql://"), "\(text)")
            let shell = try #require(text.split(separator: "\n").first { $0.contains("database shell: ") })
            let command = String(shell[shell.range(of: "database shell: ")!.upperBound...])
            #expect(try bash("\(command) -qAtc 'SELECT 41 + 1'").contains("42"), "\(command)")

            run.signalGroup(SIGINT)
            let status = run.wait(timeout: 30)
            #expect(status == 0, "stderr: \(run.stderr.text.suffix(2000))")
            #expect(!sandbox.clusterRunning, "PostgreSQL left running after Ctrl-C")
        }

        /// The server cannot listen (the port is taken) and exits at once: scripts/run must still
        /// stop its PostgreSQL, and the next run must start.
        @Test func aServerThatCannotListenStillStopsTheCluster() throws {
            let sandbox = try Sandbox()
            let busy = try LoopbackPort.bind(listening: true)
            let failed = try sandbox.run(port: busy.port)
            defer { failed.killGroup() }
            let status = failed.wait(timeout: 120)
            close(busy.fd)
            #expect(status != nil && status != 0, "status \(String(describing: status)); stderr: \(failed.stderr.text.suffix(2000))")
            #expect(failed.stderr.text.contains("adtally exited with status"), "\(failed.stderr.text.suffix(2000))")
            #expect(!sandbox.clusterRunning, "PostgreSQL left running after the server failed to listen")

            let port = try LoopbackPort.free()
            let again = try sandbox.run(port: port)
            defer { again.killGroup() }
            try Self.expectServesThenStopsOnCtrlC(again, port: port, sandbox)
        }

        /// A postmaster.pid left by a cluster that did not stop cleanly (the machine or the script
        /// was killed): its process is gone, or its number now belongs to another process, which
        /// PostgreSQL alone would take for a running server. The next run starts anyway.
        @Test(arguments: ["no such process", "a reused process number"])
        func aStalePidFileIsRecovered(_ kind: String) throws {
            let sandbox = try Sandbox()
            let port = try LoopbackPort.free()
            let first = try sandbox.run(port: port)
            defer { first.killGroup() }
            try Self.expectServesThenStopsOnCtrlC(first, port: port, sandbox)

            // A process of the cluster's owner (postgres when we are root), as a reused number is.
            let stand = Process()
            stand.executableURL = URL(fileURLWithPath: getuid() == 0 ? "/usr/sbin/runuser" : "/bin/sh")
            stand.arguments = (getuid() == 0 ? ["-u", "postgres", "--", "/bin/sh"] : []) + ["-c", "echo $$; exec sleep 120"]
            let standOutput = Pipe()
            stand.standardOutput = standOutput
            var standPID: pid_t?
            defer { if let standPID { kill(standPID, SIGKILL) } }
            let stalePID: String
            if kind == "no such process" {
                // pid_max itself is never handed out.
                stalePID = try String(contentsOfFile: "/proc/sys/kernel/pid_max", encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            } else {
                try stand.run()
                let line = String(decoding: standOutput.fileHandleForReading.availableData, as: UTF8.self)
                stalePID = line.trimmingCharacters(in: .whitespacesAndNewlines)
                standPID = pid_t(stalePID)
                #expect(standPID != nil, "\(line)")
            }
            let data = sandbox.cluster.appendingPathComponent("data").path
            try "\(stalePID)\n\(data)\n".write(to: sandbox.pidFile, atomically: false, encoding: .utf8)

            let port2 = try LoopbackPort.free()
            let second = try sandbox.run(port: port2)
            defer { second.killGroup() }
            try Self.expectServesThenStopsOnCtrlC(second, port: port2, sandbox)
            #expect(second.stderr.text.contains("stale postmaster.pid"), "\(second.stderr.text.suffix(2000))")
        }
    }
}
