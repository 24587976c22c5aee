import Foundation
import TestSupport
import Testing

extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct CommandLine {
        /// The variables of the configuration reference, which `ConfigurationReferenceTests` holds to
        /// the declared settings.
        static func documentedVariables() throws -> [String] {
            let text = try String(contentsOf: Paths.repositoryRoot.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
            return text.split(separator: "\n").filter { $0.hasPrefix("| `") }.map { String($0.dropFirst(3).prefix { $0 != "`" }) }
        }

        /// The binary's `--help` names every setting whole, each at the start of its line, and no
        /// variable that is not one (a name cut to a column would be one).
        @Test func helpNamesEveryVariableWhole() throws {
            let run = try ChildProcess.run(["--help"], environment: ChildProcess.environment([:]))
            #expect(run.status == 0, "\(run.stderr)")
            let variables = try Self.documentedVariables()
            #expect(variables.count > 20)
            let environment = run.stdout.components(separatedBy: "Environment:").last ?? ""
            let named = environment.split(separator: "\n").filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
                .map { String($0.dropFirst(2).prefix { $0 != " " }) }
            #expect(named == variables, "--help's variables differ from docs/CONFIGURATION.md's")
        }

        @Test func badPortStopsWithOneLineNamingPort() throws {
            let run = try ChildProcess.run(["serve"], environment: ChildProcess.environment([
                "DATABASE_URL": try TestDatabase.serverConnectionString(), "PORT": "abc",
                "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path,
            ]))
            #expect(run.status != nil && run.status != 0)
            let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: true)
            #expect(lines.count == 1, "\(run.stderr)")
            #expect(lines.first?.hasPrefix("adtally: configuration: PORT ") == true, "\(run.stderr)")
        }

        @Test func missingDatabaseURLStopsWithOneLineNamingIt() throws {
            let run = try ChildProcess.run(["serve"], environment: ChildProcess.environment([
                "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path,
            ]))
            #expect(run.status != nil && run.status != 0)
            let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: true)
            #expect(lines.count == 1, "\(run.stderr)")
            #expect(lines.first?.hasPrefix("adtally: configuration: DATABASE_URL ") == true, "\(run.stderr)")
        }

        /// The reader of the server's standard output goes away (a log shipper restarting, a
        /// pipe into `head`): log lines are then lost, but the server keeps serving and still
        /// stops cleanly. (FileHandle.write trapped on EPIPE, which killed the server.)
        @Test func aClosedStandardOutputDoesNotStopTheServer() throws {
            let process = Process()
            process.executableURL = Paths.binary
            process.arguments = ["serve"]
            process.environment = ChildProcess.environment([
                "DATABASE_URL": try TestDatabase.create(prefix: "e2e").connectionString, "HOST": "127.0.0.1", "PORT": "0",
                "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path,
            ])
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            let exited = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in exited.signal() }
            try process.run()
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

            // Read up to the "listening" line (bounded), then close the read end of the pipe.
            let fd = output.fileHandleForReading.fileDescriptor
            var text = ""
            var port: Int?
            let deadline = Date() + 30
            while port == nil, Date() < deadline {
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 500) > 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                text += String(decoding: buffer[0..<count], as: UTF8.self)
                port = text.split(separator: "\n").lazy.compactMap(ServerProcess.listeningPort).first
            }
            try output.fileHandleForReading.close()
            let bound = try #require(port, "no listening line: \(text)")

            for _ in 0..<3 {
                #expect(try HTTPClient.request(port: bound, method: "GET", path: "/healthz").status == 200)
            }
            // Shutting down writes its own lines (and flushes the access log) into the closed pipe.
            kill(process.processIdentifier, SIGTERM)
            #expect(exited.wait(timeout: .now() + 15) == .success, "no exit within 15 s of SIGTERM")
            #expect(process.terminationReason == .exit && process.terminationStatus == 0,
                    "status \(process.terminationStatus), reason \(process.terminationReason.rawValue)")
        }

        /// API.md section 5: SIGTERM stops an idle server, exit 0, within 10 s.
        @Test func sigtermStopsAnIdleServer() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }
            let health = try server.request("GET", "/healthz")
            #expect(health.status == 200)
            let started = Date()
            let status = server.stop(timeout: 10)
            #expect(status == 0, "exit status \(String(describing: status)); stdout: \(server.child.stdout.text.suffix(1000))")
            #expect(Date().timeIntervalSince(started) < 10)
        }
    }
}
