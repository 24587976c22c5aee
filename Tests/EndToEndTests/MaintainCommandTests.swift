import Foundation
import TestSupport
import Testing

/// The data lifecycle from outside: `adtally maintain` as an operator's scheduler runs it, the
/// maintenance a serving process runs by itself, and what both leave in `/metrics` and in the
/// reports' `final_before`.
extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct MaintainCommand {
        static func lines(_ text: String) -> [[String: Any]] {
            text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        static func instant(_ text: Any?) -> Date? {
            (text as? String).flatMap { ISO8601DateFormatter.milliseconds.date(from: $0) }
        }

        /// `final_before` is never later than now and, with a healthy database, at most 60 s behind.
        static func expectRecent(_ finalBefore: Date?, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            guard let finalBefore else {
                Issue.record("\(what): no final_before", sourceLocation: sourceLocation)
                return
            }
            // The clocks are one machine's; a millisecond of rounding either way.
            #expect(finalBefore <= Date().addingTimeInterval(0.001), "\(what): \(finalBefore) is later than now", sourceLocation: sourceLocation)
            #expect(finalBefore >= Date().addingTimeInterval(-60), "\(what): \(finalBefore) is more than 60 s old", sourceLocation: sourceLocation)
        }

        @Test func maintainPrintsItsStepsAndServersReportTheirOwnRuns() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            // This server never runs maintenance itself: the command does.
            let server = try ServerProcess.start(databaseURL: database.connectionString,
                                                 extra: ["ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "0"])
            defer { server.kill() }
            #expect(try server.putFeed("s-maint", snapshot: "feed-1", ads: [Body.ad("ad-1", 0, "acme")]).status == 201)
            let posted = try server.postEvents(["events": [Body.event("impression", session: "s-maint", ad: "ad-1"),
                                                           Body.event("click", session: "s-maint", ad: "ad-1")]])
            #expect(try EventsAnswer(posted).accepted == 2, "\(posted.text)")

            let environment = ChildProcess.environment([
                "DATABASE_URL": database.connectionString,
                "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path,
                "LOG_LEVEL": "warning",
            ])
            let run = try ChildProcess.run(["maintain"], environment: environment)
            #expect(run.status == 0, "stdout: \(run.stdout) stderr: \(run.stderr)")
            let steps = Self.lines(run.stdout)
            #expect(steps.count == run.stdout.split(separator: "\n").count, "every line is one JSON object: \(run.stdout)")
            #expect(steps.compactMap { $0["step"] as? String } == ["partitions", "rollups", "partitions_dropped", "ledger", "sessions", "final_before"],
                    "\(run.stdout)")
            #expect(steps.first { $0["step"] as? String == "partitions" }?["made"] is String, "\(run.stdout)")
            let ahead = try Psql.value("SELECT max(upper) > now() + interval '7 days' FROM adtally_event_partitions()",
                                       database.connectionString)
            #expect(ahead == "t", "the partitions reach a week ahead")
            Self.expectRecent(Self.instant(steps.last?["final_before"]), "adtally maintain")

            // A second run right after has nothing to make: idempotent.
            let again = try ChildProcess.run(["maintain"], environment: environment)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(Self.lines(again.stdout).first { $0["step"] as? String == "partitions" }?["made"] as? String == "", "\(again.stdout)")

            // Two at once: both succeed, neither fails for the other.
            let one = try ChildProcess(arguments: ["maintain"], environment: environment)
            defer { one.killAndReap() }
            let two = try ChildProcess(arguments: ["maintain"], environment: environment)
            defer { two.killAndReap() }
            #expect(one.wait(timeout: 30) == 0, "\(one.stderr.text)")
            #expect(two.wait(timeout: 30) == 0, "\(two.stderr.text)")

            // The reports' final_before, in JSON and as the CSV listing's header.
            let report = try server.request("GET", "/v1/reports/ads/ad-1", headers: [Body.auth])
            #expect(report.status == 200 && report.json?["impressions"] as? Int == 1 && report.json?["clicks"] as? Int == 1, "\(report.text)")
            Self.expectRecent(Self.instant(report.json?["final_before"]), "single-ad report")
            let csv = try server.request("GET", "/v1/reports/ads?format=csv", headers: [Body.auth])
            #expect(csv.status == 200, "\(csv.text)")
            Self.expectRecent(Self.instant(csv.header("AdTally-Final-Before")), "CSV listing header")

            // A server that maintains by itself every second counts its runs and publishes the state.
            let maintaining = try ServerProcess.start(databaseURL: database.connectionString,
                                                      extra: ["ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "1"])
            defer { maintaining.kill() }
            let deadline = Date() + 30
            var metrics = ""
            while Date() < deadline {
                metrics = try maintaining.request("GET", "/metrics").text
                if metrics.contains("adtally_maintenance_runs_total{result=\"ok\"} ") && !metrics.contains("adtally_maintenance_runs_total{result=\"ok\"} 0\n") { break }
                Thread.sleep(forTimeInterval: 0.1)  // polling the process's counter, not waiting out a race
            }
            #expect(metrics.contains("# TYPE adtally_maintenance_runs_total counter"), "\(metrics.prefix(3000))")
            #expect(!metrics.contains("adtally_maintenance_runs_total{result=\"ok\"} 0\n"), "no successful run within 30 s")
            #expect(metrics.contains("adtally_maintenance_runs_total{result=\"failed\"} 0\n"), "\(metrics)")
            func gauge(_ name: String) -> Double? {
                metrics.split(separator: "\n").first { $0.hasPrefix("\(name) ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
            }
            let oldest = try #require(gauge("adtally_events_oldest_received_seconds"), "\(metrics)")
            #expect(abs(oldest - Date().timeIntervalSince1970) < 300, "the oldest event kept is the impression of a moment ago: \(oldest)")
            let published = try #require(gauge("adtally_reports_final_before_seconds"), "\(metrics)")
            Self.expectRecent(Date(timeIntervalSince1970: published), "metrics")
        }
    }
}
