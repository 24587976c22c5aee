import Foundation
import Testing
import TestSupport

extension EndToEnd {
    @Suite struct MigrateCommand {
        @Test func migrateTwiceInARowAndTwiceAtOnce() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            let environment = ChildProcess.environment([
                "DATABASE_URL": database.connectionString,
                "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path,
                "LOG_LEVEL": "warning",
            ])
            for round in 1...2 {
                let run = try ChildProcess.run(["migrate"], environment: environment)
                #expect(run.status == 0, "round \(round): \(run.stderr) \(run.stdout)")
            }
            // Two at once on a fresh database.
            let fresh = try TestDatabase.create(prefix: "e2e")
            var concurrentEnvironment = environment
            concurrentEnvironment["DATABASE_URL"] = fresh.connectionString
            let one = try ChildProcess(arguments: ["migrate"], environment: concurrentEnvironment)
            defer { one.killAndReap() }
            let two = try ChildProcess(arguments: ["migrate"], environment: concurrentEnvironment)
            defer { two.killAndReap() }
            let oneStatus = one.wait(timeout: 30)
            let twoStatus = two.wait(timeout: 30)
            #expect(oneStatus == 0, "\(one.stderr.text) \(one.stdout.text)")
            #expect(twoStatus == 0, "\(two.stderr.text) \(two.stdout.text)")

            let expectedRows = try Paths.migrationFileCount()
            #expect(expectedRows >= 1)
            for url in [database.connectionString, fresh.connectionString] {
                let server = try ServerProcess.start(databaseURL: url)
                defer { server.kill() }
                let ready = try server.request("GET", "/readyz")
                #expect(ready.status == 200, "\(ready.text)")
                #expect(ready.json?["status"] as? String == "ready", "\(ready.text)")
                #expect(server.stop() == 0)

                let count = try psql("SELECT count(*) FROM schema_migrations", url)
                #expect(count == "\(expectedRows)", "schema_migrations rows: \(count)")
            }
        }

        /// `psql -tAc query url`, bounded; the trimmed output.
        func psql(_ query: String, _ url: String) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["psql", "-X", "-tAc", query, url]
            let output = Pipe()
            process.standardOutput = output
            let done = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in done.signal() }
            try process.run()
            let collector = OutputCollector.draining(output.fileHandleForReading)
            if done.wait(timeout: .now() + 30) == .timedOut {
                process.terminate()
                throw ServerStartError(description: "psql did not finish within 30 s")
            }
            _ = collector.waitForEnd(until: Date() + 2)
            #expect(process.terminationStatus == 0)
            return collector.text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}
