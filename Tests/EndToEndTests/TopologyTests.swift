import Foundation
import TestSupport
import Testing

extension EndToEnd {
    /// API.md section 8 with the real binary: a pooler in transaction mode, a `COMMIT` whose answer
    /// is lost, and reports on a hot standby.
    @Suite(.timeLimit(.minutes(5))) struct Topology {
        static func serverPort() throws -> Int {
            let url = try TestDatabase.serverConnectionString()
            return try #require(URLComponents(string: url)?.port, "DATABASE_URL has no port: \(url)")
        }

        /// Counts the stored events with this id (lower case, as stored).
        static func stored(_ id: String, _ url: String) throws -> String {
            try Psql.value("SELECT count(*) FROM events WHERE event_id = '\(id.lowercased())'", url)
        }

        @Test func theWholeLifeOfASessionThroughPgbouncerInTransactionMode() throws {
            let db = try TestDatabase.create(prefix: "e2e")
            let bouncer = try Pgbouncer(targetPort: try Self.serverPort())
            var extra = ServerProcess.version1ClickRules
            extra["ADTALLY_DB_PREPARED_STATEMENTS"] = "off"
            let server = try ServerProcess.start(databaseURL: bouncer.connectionString(database: db.name), extra: extra)
            defer { server.kill() }
            try SessionLifecycle.wholeLife(on: server)  // ends with the server stopped
            // The migrations' locks were transaction-level: none is left on any server connection.
            #expect(try Psql.value("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'", db.connectionString) == "0")
        }

        @Test func aCommitWhoseAnswerIsLostIsAnswered503AndItsRetryFromTheLedger() throws {
            let db = try TestDatabase.create(prefix: "e2e")
            let proxy = try CuttingProxy(targetPort: try Self.serverPort())
            let server = try ServerProcess.start(databaseURL: proxy.connectionString(database: db.name))
            defer { server.kill() }
            #expect(try server.putFeed("s-cut", snapshot: "f-1", ads: [Body.ad("ad-1", 1, "acme"), Body.ad("ad-2", 2, "acme")]).status == 201)

            // Each cut: the answer is 503 with Retry-After; the event stored once if the COMMIT ran,
            // not at all if it never arrived; the client's retry (from the ledger when it had
            // committed) is answered with the outcome it has, and the event is stored once.
            for (arm, ad, storedByTheCut) in [(CuttingProxy.Arm.loseCommitAnswer, "ad-1", "1"), (.dropCommit, "ad-2", "0")] {
                let event = Body.event("impression", session: "s-cut", ad: ad)
                let id = try #require(event["event_id"] as? String)
                let cutsBefore = proxy.cuts
                proxy.arm(arm)
                let cut = try server.postEvents(event)
                #expect(proxy.cuts == cutsBefore + 1, "\(arm)")
                #expect(cut.status == 503, "\(arm): \(cut.status) \(cut.text)")
                #expect(cut.errorCode == "unavailable")
                #expect(Int(cut.header("Retry-After") ?? "") != nil)
                #expect(try Self.stored(id, db.connectionString) == storedByTheCut, "\(arm)")
                let retried = try EventsAnswer(server.postEvents(event))
                #expect(retried.statuses == ["accepted"], "\(arm)")
                #expect(try Self.stored(id, db.connectionString) == "1", "\(arm)")
            }
            #expect(server.stop() == 0)
        }

        @Test func reportsFromAStandbyEqualThePrimarysAndItsOutageStopsOnlyThem() throws {
            let primary = try DisposableCluster()
            let standby = try primary.makeStandby()
            let onStandby = try ServerProcess.start(databaseURL: primary.connectionString,
                                                    extra: ["ADTALLY_REPORTS_DATABASE_URL": standby.connectionString])
            defer { onStandby.kill() }
            let onPrimary = try ServerProcess.start(databaseURL: primary.connectionString)
            defer { onPrimary.kill() }

            #expect(try onStandby.putFeed("s-r", snapshot: "f-1", ads: [Body.ad("ad-r1", 1, "acme"), Body.ad("ad-r2", 4, "globex")]).status == 201)
            let events: [[String: Any]] = [
                Body.event("impression", session: "s-r", ad: "ad-r1"), Body.event("impression", session: "s-r", ad: "ad-r1"),
                Body.event("impression", session: "s-r", ad: "ad-r2"), Body.event("click", session: "s-r", ad: "ad-r1", snapshot: "f-1", position: 1),
                Body.event("click", session: "s-r", ad: "ad-gone"),
            ]
            #expect(try onStandby.postEvents(["events": events]).status == 200)
            let stored = Date()

            // Compare once the standby has replayed everything the primary wrote, and the
            // final_before the primary publishes (every few seconds) is past the events there too.
            try primary.waitUntilReplayed(by: standby)
            let standbyFinal = Operations.poll(seconds: 30) { () -> Date? in
                let report = try? onStandby.request("GET", "/v1/reports/ads/ad-r1", headers: [Body.auth])
                guard let text = report?.json?["final_before"] as? String, let instant = ISO8601DateFormatter.milliseconds.date(from: text),
                      instant > stored else { return nil }
                return instant
            }
            #expect(standbyFinal != nil, "the standby's final_before never passed the events")
            let paths = ["/v1/reports/ads/ad-r1", "/v1/reports/ads/ad-r2", "/v1/reports/ads", "/v1/reports/ads?granularity=day",
                         "/v1/reports/ads?format=csv", "/v1/sessions/s-r/feed"]
            for path in paths {
                let fromStandby = try onStandby.request("GET", path, headers: [Body.auth])
                let fromPrimary = try onPrimary.request("GET", path, headers: [Body.auth])
                #expect(fromStandby.status == 200, "\(path): \(fromStandby.text)")
                // The same counts; final_before is each server's own (the standby's is what the
                // primary last published, never later than the primary's).
                #expect(Self.withoutFinalBefore(fromStandby.text) == Self.withoutFinalBefore(fromPrimary.text), "\(path)")
                if let ours = (fromStandby.json?["final_before"] as? String).flatMap(ISO8601DateFormatter.milliseconds.date(from:)),
                   let theirs = (fromPrimary.json?["final_before"] as? String).flatMap(ISO8601DateFormatter.milliseconds.date(from:)) {
                    #expect(ours <= theirs, "\(path)")
                }
            }
            let report = try onStandby.request("GET", "/v1/reports/ads/ad-r1", headers: [Body.auth])
            #expect(report.json?["impressions"] as? Int == 1)
            #expect(report.json?["clicks"] as? Int == 1)
            // They were read on the standby: its reports pool holds connections there.
            #expect(try Psql.value("SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'adtally'",
                                   standby.connectionString) == "t")

            // The reports database down: reports and feed reads 503, ingestion and readiness go on.
            try standby.stop()
            for path in ["/v1/reports/ads/ad-r1", "/v1/reports/ads", "/v1/sessions/s-r/feed"] {
                let refused = try onStandby.request("GET", path, headers: [Body.auth])
                #expect(refused.status == 503, "\(path): \(refused.text)")
                #expect(refused.errorCode == "unavailable")
                #expect(Int(refused.header("Retry-After") ?? "") != nil)
            }
            #expect(try onStandby.postEvents(Body.event("impression", session: "s-r", ad: "ad-r2")).status == 200)
            #expect(try onStandby.request("GET", "/readyz").status == 200)
            let metrics = try onStandby.request("GET", "/metrics").text
            #expect(metrics.contains("\nadtally_reports_database_up 0\n"), "\(metrics.suffix(800))")
            #expect(onStandby.child.stdout.text.contains("reports database unreachable"))

            try standby.start()
            let back = Operations.poll(seconds: 15) { () -> Int? in
                (try? onStandby.request("GET", "/v1/reports/ads/ad-r1", headers: [Body.auth]))?.status == 200 ? 200 : nil
            }
            #expect(back == 200, "reports did not come back with the standby")
            #expect(try onStandby.request("GET", "/metrics").text.contains("\nadtally_reports_database_up 1\n"))
            #expect(onStandby.stop() == 0)
            #expect(onPrimary.stop() == 0)
        }

        /// A report body with its final_before value replaced.
        static func withoutFinalBefore(_ text: String) -> String {
            text.replacingOccurrences(of: #""final_before":"[^"]*""#, with: #""final_before":"-""#, options: .regularExpression)
        }
    }
}
