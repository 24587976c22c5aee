import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct CommandLine {
        static let variables = ["DATABASE_URL", "HOST", "PORT", "ADTALLY_ADMIN_TOKEN", "ADTALLY_DB_POOL_SIZE",
                                "ADTALLY_CLICK_WINDOW_SECONDS", "LOG_LEVEL"]

        @Test func helpNamesEveryVariable() throws {
            let run = try ChildProcess.run(["--help"], environment: ChildProcess.environment([:]))
            #expect(run.status == 0, "\(run.stderr)")
            for variable in Self.variables {
                #expect(run.stdout.contains(variable), "--help does not mention \(variable)")
            }
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
