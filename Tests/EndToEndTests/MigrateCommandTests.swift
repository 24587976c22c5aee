import Foundation
import TestSupport
import Testing

extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct MigrateCommand {
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

                let count = try Psql.value("SELECT count(*) FROM schema_migrations", url)
                #expect(count == "\(expectedRows)", "schema_migrations rows: \(count)")
            }
        }
    }
}
