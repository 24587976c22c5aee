import Foundation
import Testing

extension EndToEnd {
    /// API 1.4 against the real binary: credits (section 10) and erasure (section 12), with the
    /// contract's statuses, scopes, bodies and metrics; every report the same after an erasure.
    @Suite(.timeLimit(.minutes(5))) struct AfterTheFact {
        static let feedToken = "e2e-feed-token-after-the-fact"
        static let reportToken = "e2e-report-token-after-the-fact"
        static func bearer(_ token: String) -> (String, String) { ("Authorization", "Bearer \(token)") }

        static func start() throws -> ServerProcess {
            try ServerProcess.start(extra: ["ADTALLY_FEED_TOKENS": feedToken, "ADTALLY_REPORT_TOKENS": reportToken])
        }

        /// Two sessions with impressions and clicks on two ads; returns the instant after them.
        static func traffic(_ server: ServerProcess) throws -> String {
            for (session, feed) in [("af-1", "af-feed-1"), ("af-2", "af-feed-2")] {
                #expect(try server.putFeed(session, snapshot: feed, ads: [Body.ad("af-ad-1", 1, "acme"), Body.ad("af-ad-2", 2, "globex")]).status == 201)
                let answer = try EventsAnswer(server.postEvents(["events": [
                    Body.event("impression", session: session, ad: "af-ad-1"), Body.event("impression", session: session, ad: "af-ad-2"),
                    Body.event("click", session: session, ad: "af-ad-1"), Body.event("impression", session: session, ad: "af-ad-1"),
                ]]))
                #expect(answer.totals == [3, 1, 0])
            }
            Thread.sleep(forTimeInterval: 0.01)  // an instant after the last event, in the past when `to` is checked
            return ISO8601DateFormatter.milliseconds.string(from: Date())
        }

        static func reports(_ server: ServerProcess, to: String) throws -> [String] {
            var bodies: [String] = []
            for path in ["/v1/reports/ads/af-ad-1", "/v1/reports/ads/af-ad-2", "/v1/reports/ads?granularity=day&tz=Asia/Kolkata",
                         "/v1/reports/ads?format=csv", "/v1/reports/ads/af-ad-1?to=\(to)&tz=America/New_York"] {
                let response = try server.request("GET", path, headers: [bearer(reportToken)])
                #expect(response.status == 200, "\(path): \(response.text)")
                // final_before moves with the clock: compared without it.
                bodies.append(response.text.replacingOccurrences(of: #""final_before":"[^"]*""#, with: "", options: .regularExpression))
            }
            return bodies
        }

        @Test func creditsAsTheContractSays() throws {
            let server = try Self.start()
            defer { server.kill() }
            let from = ISO8601DateFormatter.milliseconds.string(from: Date().addingTimeInterval(-60))
            let to = try Self.traffic(server)
            let body: [String: Any] = ["adjustment_id": "af-review-1", "reason": "sivt", "note": "a click farm",
                                       "from": from, "to": to, "session_ids": ["af-1"]]
            let reportsBefore = try Self.reports(server, to: to)

            // Scopes, media type and body first.
            #expect(try server.request("POST", "/v1/adjustments", headers: [Body.jsonType, Self.bearer(Self.reportToken)], body: Body.json(body)).status == 403)
            #expect(try server.request("POST", "/v1/adjustments", headers: [Body.jsonType, Self.bearer(Self.feedToken)], body: Body.json(body)).status == 403)
            #expect(try server.request("POST", "/v1/adjustments", headers: [Body.jsonType], body: Body.json(body)).status == 401)
            #expect(try server.request("POST", "/v1/adjustments", headers: [Body.auth], body: Body.json(body)).status == 415)
            var late = body
            late["to"] = ISO8601DateFormatter.milliseconds.string(from: Date().addingTimeInterval(3_600))
            let refused = try server.request("POST", "/v1/adjustments", headers: [Body.jsonType, Body.auth], body: Body.json(late))
            #expect(refused.status == 400 && refused.errorCode == "invalid_adjustment" && refused.errorField == "to", "\(refused.text)")
            let noFilter = try server.request("POST", "/v1/adjustments", headers: [Body.jsonType, Body.auth],
                                              body: Body.json(["adjustment_id": "x", "reason": "sivt", "from": from, "to": to]))
            #expect(noFilter.status == 400 && noFilter.errorField == "session_ids", "\(noFilter.text)")

            let made = try server.request("POST", "/v1/adjustments", headers: [Body.jsonType, Body.auth], body: Body.json(body))
            #expect(made.status == 201, "\(made.text)")
            let answer = try #require(made.json)
            #expect(answer["adjustment_id"] as? String == "af-review-1")
            #expect(answer["note"] as? String == "a click farm")
            #expect(answer["credited_impressions"] as? Int == 2)
            #expect(answer["credited_clicks"] as? Int == 1)
            let ads = try #require(answer["ads"] as? [[String: Any]])
            #expect(ads.map { $0["ad_id"] as? String } == ["af-ad-1", "af-ad-2"])
            #expect(ads.map { $0["advertiser_id"] as? String } == ["acme", "globex"])
            #expect((answer["created_at"] as? String)?.hasSuffix("Z") == true)

            let again = try server.request("POST", "/v1/adjustments", headers: [Body.jsonType, Body.auth], body: Body.json(body))
            #expect(again.status == 200 && again.text == made.text, "\(again.text)")
            var other = body
            other["session_ids"] = ["af-2"]
            let conflict = try server.request("POST", "/v1/adjustments", headers: [Body.jsonType, Body.auth], body: Body.json(other))
            #expect(conflict.status == 409 && conflict.errorCode == "adjustment_conflict", "\(conflict.text)")

            let read = try server.request("GET", "/v1/adjustments/af-review-1", headers: [Self.bearer(Self.reportToken)])
            #expect(read.status == 200 && read.text == made.text)
            #expect(try server.request("GET", "/v1/adjustments/none", headers: [Self.bearer(Self.reportToken)]).status == 404)
            #expect(try server.request("GET", "/v1/adjustments/bad%20id", headers: [Self.bearer(Self.reportToken)]).errorCode == "invalid_path")

            // The credits report, JSON and CSV; the counts' reports do not change.
            let credits = try server.request("GET", "/v1/reports/credits?from=\(from)", headers: [Self.bearer(Self.reportToken)])
            #expect(credits.status == 200, "\(credits.text)")
            let rows = try #require(credits.json?["rows"] as? [[String: Any]])
            #expect(rows.map { $0["ad_id"] as? String } == ["af-ad-1", "af-ad-2"])
            #expect(rows.map { $0["credited_impressions"] as? Int } == [1, 1])
            #expect(rows.map { $0["credited_clicks"] as? Int } == [1, 0])
            #expect(rows.allSatisfy { $0["final"] as? Bool == false })
            let csv = try server.request("GET", "/v1/reports/credits?format=csv&advertiser_id=globex", headers: [Self.bearer(Self.reportToken)])
            let lines = csv.text.split(separator: "\r\n")
            #expect(csv.header("Content-Type") == "text/csv; charset=utf-8")
            #expect(lines.first == "adjustment_id,reason,created_at,ad_id,advertiser_id,events_from,events_to,credited_impressions,credited_clicks,final")
            #expect(lines.count == 2 && lines.last?.hasPrefix("af-review-1,sivt,") == true && lines.last?.hasSuffix(",globex,\(from),\(to),1,0,false") == true,
                    "\(csv.text)")
            #expect(try server.request("GET", "/v1/reports/credits?tz=Mars/Olympus", headers: [Self.bearer(Self.reportToken)]).errorField == "tz")
            #expect(try Self.reports(server, to: to) == reportsBefore)

            let metrics = try Operations.parsePrometheus(try server.request("GET", "/metrics").text)
            #expect(metrics["adtally_adjustments_total{reason=\"sivt\"}"] == 1)
            #expect(metrics["adtally_credited_events_total{type=\"impression\"}"] == 2)
            #expect(metrics["adtally_credited_events_total{type=\"click\"}"] == 1)
        }

        @Test func erasureAsTheContractSays() throws {
            let server = try Self.start()
            defer { server.kill() }
            let to = try Self.traffic(server)
            let before = try Self.reports(server, to: to)

            #expect(try server.request("DELETE", "/v1/sessions/af-1", headers: [Self.bearer(Self.reportToken)]).status == 403)
            #expect(try server.request("DELETE", "/v1/sessions/af-1", headers: [Self.bearer(Self.feedToken)]).status == 403)
            #expect(try server.request("DELETE", "/v1/sessions/af%2F1", headers: [Body.auth]).errorCode == "invalid_path")
            let erased = try server.request("DELETE", "/v1/sessions/af-1", headers: [Body.auth])
            #expect(erased.status == 200, "\(erased.text)")
            let body = try #require(erased.json)
            #expect(body["session_id"] as? String == "af-1")
            #expect(body["events"] as? Int == 4)
            #expect(body["snapshots"] as? Int == 1)
            let again = try #require(try server.request("DELETE", "/v1/sessions/af-1", headers: [Body.auth]).json)
            #expect(again["erased_at"] as? String == body["erased_at"] as? String)
            #expect(again["events"] as? Int == 0 && again["snapshots"] as? Int == 0)

            #expect(try Self.reports(server, to: to) == before)
            let feed = try server.request("GET", "/v1/sessions/af-1/feed", headers: [Body.auth])
            #expect(feed.status == 410 && feed.errorCode == "session_erased", "\(feed.text)")
            let put = try server.putFeed("af-1", snapshot: "af-feed-9", ads: [Body.ad("af-ad-1", 1, "acme")])
            #expect(put.status == 410 && put.errorCode == "session_erased")
            let report = { try server.request("GET", "/v1/reports/ads/af-ad-1", headers: [Self.bearer(Self.reportToken)]).json ?? [:] }
            let beforeEvents = try report()
            let events = try EventsAnswer(server.postEvents(["events": [Body.event("impression", session: "af-1", ad: "af-ad-1"),
                                                                         Body.event("impression", session: "af-2", ad: "af-ad-1")]]))
            #expect(events.totals == [0, 1, 1])
            #expect(events.results.first?["reason"] as? String == "session_erased")
            // The erased session's event is in no count; the other session's duplicate is.
            let afterEvents = try report()
            #expect(afterEvents["rejected_impressions"] as? Int == beforeEvents["rejected_impressions"] as? Int)
            #expect(afterEvents["duplicate_impressions"] as? Int == (beforeEvents["duplicate_impressions"] as? Int ?? -9) + 1)
            let never = try #require(try server.request("DELETE", "/v1/sessions/af-never", headers: [Body.auth]).json)
            #expect(never["events"] as? Int == 0)
            let metrics = try Operations.parsePrometheus(try server.request("GET", "/metrics").text)
            #expect(metrics["adtally_sessions_erased_total"] == 2)
        }
    }
}
