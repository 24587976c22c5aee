import Foundation
import TestSupport
import Testing

/// Operators alert on `ERROR` lines in PostgreSQL's log. Normal operation writes none there:
/// replays, duplicates, rejections, a feed registered again or refused, reports of every kind and
/// a maintenance run are all answered without a statement failing on the server.
extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct PostgresLog {
        @Test func normalOperationWritesNoErrorIntoPostgresLog() throws {
            let cluster = try DisposableCluster()
            let server = try ServerProcess.start(databaseURL: cluster.connectionString,
                                                 extra: ["ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "1"])
            defer { server.kill() }
            let ads = [Body.ad("ad-1", 0, "acme"), Body.ad("ad-2", 1, "globex")]
            #expect(try server.putFeed("s-log", snapshot: "feed-1", ads: ads).status == 201)
            #expect(try server.putFeed("s-log", snapshot: "feed-1", ads: ads).status == 200, "the same registration again")
            #expect(try server.putFeed("s-other", snapshot: "feed-1", ads: ads).status == 409, "another session's snapshot id")

            let batch: [String: Any] = ["events": [
                Body.event("impression", session: "s-log", ad: "ad-1"),
                Body.event("impression", session: "s-log", ad: "ad-1"),           // already counted
                Body.event("click", session: "s-log", ad: "ad-1", position: 0),
                Body.event("click", session: "s-log", ad: "ad-1", position: 0),   // within the window
                Body.event("click", session: "s-log", ad: "ad-9"),                // not in the feed
                Body.event("click", session: "s-log", ad: "ad-2", position: 7),   // wrong row
                Body.event("impression", session: "s-unknown", ad: "ad-1"),       // never served
            ]]
            let first = try EventsAnswer(server.postEvents(batch))
            #expect(first.accepted == 2 && first.duplicate == 2 && first.rejected == 3, "\(first.statuses) \(first.reasons)")
            // The whole batch replayed, three times, and once at the same moment from two threads.
            for _ in 0..<3 {
                #expect(try EventsAnswer(server.postEvents(batch)).statuses == first.statuses)
            }
            let body = Body.json(batch)
            let group = DispatchGroup()
            for _ in 0..<2 {
                group.enter()
                Thread {
                    _ = try? server.request("POST", "/v1/events", headers: [Body.jsonType], body: body)
                    group.leave()
                }.start()
            }
            #expect(group.wait(timeout: .now() + 30) == .success)

            #expect(try server.request("GET", "/v1/reports/ads/ad-1", headers: [Body.auth]).status == 200)
            #expect(try server.request("GET", "/v1/reports/ads?granularity=hour&from=2026-01-01T00:00:00Z&to=2026-01-02T00:00:00Z",
                                       headers: [Body.auth]).status == 200)
            #expect(try server.request("GET", "/v1/reports/ads?format=csv", headers: [Body.auth]).status == 200)
            #expect(try server.request("GET", "/v1/sessions/s-log/feed", headers: [Body.auth]).status == 200)
            #expect(try server.request("GET", "/readyz").status == 200)
            // One maintenance run of the server's own at least (it runs every second).
            let deadline = Date() + 30
            while Date() < deadline, try !server.request("GET", "/metrics").text.contains("adtally_maintenance_runs_total{result=\"ok\"} 1") {
                Thread.sleep(forTimeInterval: 0.1)  // polling the counter
            }
            #expect(server.stop() == 0)

            let log = try cluster.serverLog()
            #expect(log.contains("ready to accept connections"), "not the server's log: \(log.prefix(500))")
            let errors = log.split(separator: "\n").filter { $0.contains("ERROR:") || $0.contains("FATAL:") }
            #expect(errors.isEmpty, "PostgreSQL logged:\n\(errors.prefix(20).joined(separator: "\n"))")
        }
    }
}
