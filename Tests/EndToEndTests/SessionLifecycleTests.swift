import Foundation
import Testing

extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct SessionLifecycle {
        /// A session from its first feed to a retried batch, every answer checked as API.md says.
        @Test func wholeLifeOfASession() throws {
            let server = try ServerProcess.start(extra: ServerProcess.version1ClickRules)
            defer { server.kill() }
            try Self.wholeLife(on: server)
        }

        /// The session life's requests and checks, on a server started with the version-1 click
        /// rules (also run through pgbouncer, `Topology`).
        static func wholeLife(on server: ServerProcess) throws {
            let session = "sess-e2e.1"
            // Sent out of position order: the GET answer must sort them.
            let firstAds = [
                Body.ad("ad-b", 9, "globex", "https://globex.example/"),
                Body.ad("ad-a", 3, "acme", "https://acme.example/landing?c=9"),
                Body.ad("ad-c", 15, "initech", "HTTPS://initech.example/x#frag"),
            ]

            // Register, then the same again (a retry).
            let created = try server.putFeed(session, snapshot: "feed-1", ads: firstAds)
            #expect(created.status == 201, "\(created.text)")
            #expect(created.header("Content-Type")?.lowercased().hasPrefix("application/json") == true)
            let createdBody = try #require(created.json)
            #expect(createdBody["session_id"] as? String == session)
            #expect(createdBody["snapshot_id"] as? String == "feed-1")
            #expect(createdBody["ads"] as? Int == 3)
            #expect(createdBody["current"] as? Bool == true)

            let retried = try server.putFeed(session, snapshot: "feed-1", ads: firstAds.reversed())
            #expect(retried.status == 200, "\(retried.text)")
            #expect(retried.json?["ads"] as? Int == 3)
            #expect(retried.json?["current"] as? Bool == true)

            // Read it back.
            let feed = try server.request("GET", "/v1/sessions/\(session)/feed", headers: [Body.auth])
            #expect(feed.status == 200, "\(feed.text)")
            let feedBody = try #require(feed.json, "\(feed.text)")
            #expect(feedBody["session_id"] as? String == session)
            #expect(feedBody["snapshot_id"] as? String == "feed-1")
            let registeredAt = try #require(feedBody["registered_at"] as? String)
            #expect(registeredAt.hasSuffix("Z"), "\(registeredAt)")
            let ads = try #require(feedBody["ads"] as? [[String: Any]])
            #expect(ads.map { $0["ad_id"] as? String } == ["ad-a", "ad-b", "ad-c"])
            #expect(ads.map { $0["position"] as? Int } == [3, 9, 15])
            #expect(ads.first?["advertiser_id"] as? String == "acme")
            #expect(ads.first?["url"] as? String == "https://acme.example/landing?c=9")

            // Impressions: the first counts, a second appearance is a duplicate.
            let firstImpressionID = UUID().uuidString // upper case: echoed lower case
            let impression = try EventsAnswer(server.postEvents(Body.event("impression", session: session, ad: "ad-a", id: firstImpressionID)))
            #expect(impression.totals == [1, 0, 0])
            #expect(impression.statuses == ["accepted"])
            #expect(impression.results.first?["event_id"] as? String == firstImpressionID.lowercased())
            let again = try EventsAnswer(server.postEvents(Body.event("impression", session: session, ad: "ad-a", snapshot: "feed-1", position: 3)))
            #expect(again.totals == [0, 1, 0])
            #expect(again.statuses == ["duplicate"])
            #expect(again.reasons == ["impression_already_counted"])

            // A click, then the same tap again under a new event_id.
            let click = try EventsAnswer(server.postEvents(Body.event("click", session: session, ad: "ad-b", snapshot: "feed-1", position: 9)))
            #expect(click.totals == [1, 0, 0])
            #expect(click.statuses == ["accepted"])
            let doubleTap = try EventsAnswer(server.postEvents(Body.event("click", session: session, ad: "ad-b", snapshot: "feed-1", position: 9)))
            #expect(doubleTap.totals == [0, 1, 0])
            #expect(doubleTap.statuses == ["duplicate"])
            #expect(doubleTap.reasons == ["click_within_window"])

            // Refresh with a shorter feed: ad-c gone, ad-b moved from row 9 to row 12.
            let refreshed = try server.putFeed(session, snapshot: "feed-2", ads: [
                Body.ad("ad-a", 3, "acme", "https://acme.example/landing?c=9"),
                Body.ad("ad-b", 12, "globex", "https://globex.example/"),
            ])
            #expect(refreshed.status == 201, "\(refreshed.text)")
            #expect(refreshed.json?["ads"] as? Int == 2)

            let removed = try EventsAnswer(server.postEvents(Body.event("click", session: session, ad: "ad-c")))
            #expect(removed.totals == [0, 0, 1])
            #expect(removed.statuses == ["rejected"])
            #expect(removed.reasons == ["ad_not_in_feed"])

            let stale = try EventsAnswer(server.postEvents(Body.event("click", session: session, ad: "ad-a", snapshot: "feed-1")))
            #expect(stale.totals == [0, 0, 1])
            #expect(stale.reasons == ["stale_snapshot"])

            let moved = try EventsAnswer(server.postEvents(Body.event("click", session: session, ad: "ad-b", position: 9)))
            #expect(moved.totals == [0, 0, 1])
            #expect(moved.reasons == ["position_mismatch"])

            // A batch with one invalid entry (no occurred_at), then the same batch retried.
            let invalidID = UUID().uuidString
            var invalid = Body.event("impression", session: session, ad: "ad-a", id: invalidID)
            invalid["occurred_at"] = nil
            let batch = Body.json(["events": [
                Body.event("impression", session: session, ad: "ad-b"),
                invalid,
                Body.event("impression", session: session, ad: "ad-a"),
            ]])
            let first = try server.request("POST", "/v1/events", headers: [Body.jsonType], body: batch)
            #expect(first.status == 200, "\(first.text)")
            let answer = try EventsAnswer(first)
            #expect(answer.totals == [1, 1, 1])
            #expect(answer.statuses == ["accepted", "rejected", "duplicate"])
            #expect(answer.reasons == [nil, "invalid_event", "impression_already_counted"])
            #expect(answer.results[1]["field"] as? String == "occurred_at")
            #expect(answer.results[1]["message"] as? String == "occurred_at is missing")
            #expect(answer.results[0]["message"] == nil && answer.results[2]["message"] == nil)
            #expect(answer.results[1]["event_id"] as? String == invalidID.lowercased())

            let retry = try server.request("POST", "/v1/events", headers: [Body.jsonType], body: batch)
            #expect(retry.status == 200)
            #expect(retry.text == first.text, "a retried batch must get the identical answer")

            #expect(server.stop() == 0)
        }

        /// The same session life's clicks under the default rules, where they answer differently:
        /// a tap that raced a refresh is billed against the feed the user saw (the grace window),
        /// and a second ad tapped in the same instant is a duplicate (the tap rule).
        @Test func theSeedsScenariosUnderTheDefaultRules() throws {
            // API 1.2's defaults: these clicks come without impressions (theSeedsScenariosUnder1_3 sends them).
            let server = try ServerProcess.start(extra: ServerProcess.withoutClickRulesOf1_3)
            defer { server.kill() }
            let session = "sess-e2e.2"
            #expect(try server.putFeed(session, snapshot: "feed-1", ads: [Body.ad("ad-a", 3, "acme"), Body.ad("ad-b", 9, "globex")]).status == 201)
            let tapped = Body.now()
            // The user taps ad-a at row 3; the feed refreshes (ad-a moves to row 7) before the click arrives.
            #expect(try server.putFeed(session, snapshot: "feed-2", ads: [Body.ad("ad-a", 7, "acme"), Body.ad("ad-b", 12, "globex")]).status == 201)
            var raced = Body.event("click", session: session, ad: "ad-a", snapshot: "feed-1", position: 3)
            raced["occurred_at"] = tapped
            let billed = try EventsAnswer(server.postEvents(raced))
            #expect(billed.statuses == ["accepted"], "\(billed.results)")
            // The same tap's second handler, for the ad the reused cell showed before: not billed.
            var piledUp = Body.event("click", session: session, ad: "ad-b", snapshot: "feed-1", position: 9)
            piledUp["occurred_at"] = tapped
            let refused = try EventsAnswer(server.postEvents(piledUp))
            #expect(refused.statuses == ["duplicate"])
            #expect(refused.reasons == ["simultaneous_click"])
            // Under version 1's rules the first would have been stale_snapshot (see wholeLifeOfASession).
            let report = try server.request("GET", "/v1/reports/ads/ad-b", headers: [Body.auth])
            #expect((report.json?["duplicates"] as? [String: Any])?["simultaneous_click"] as? Int == 1)
            #expect(server.stop() == 0)
        }

        /// The same scenario under API 1.3's defaults: without the impressions the clicks bill
        /// nothing (`no_impression`); with them, the raced tap is billed once and its pile-up is not.
        @Test func theSeedsScenariosUnder1_3() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }
            let session = "sess-e2e.3"
            #expect(try server.putFeed(session, snapshot: "feed-1", ads: [Body.ad("ad-a", 3, "acme"), Body.ad("ad-b", 9, "globex")]).status == 201)
            let tapped = Body.now()
            #expect(try server.putFeed(session, snapshot: "feed-2", ads: [Body.ad("ad-a", 7, "acme"), Body.ad("ad-b", 12, "globex")]).status == 201)
            var raced = Body.event("click", session: session, ad: "ad-a", snapshot: "feed-1", position: 3)
            raced["occurred_at"] = tapped
            let unseen = try EventsAnswer(server.postEvents(raced))
            #expect(unseen.reasons == ["no_impression"])
            // The app sends the impressions it counted, then the tap again as a new event.
            let seen = try EventsAnswer(server.postEvents(["events": [Body.event("impression", session: session, ad: "ad-a"),
                                                                      Body.event("impression", session: session, ad: "ad-b")]]))
            #expect(seen.statuses == ["accepted", "accepted"])
            raced["event_id"] = UUID().uuidString
            #expect(try EventsAnswer(server.postEvents(raced)).statuses == ["accepted"])
            var piledUp = Body.event("click", session: session, ad: "ad-b", snapshot: "feed-1", position: 9)
            piledUp["occurred_at"] = tapped
            #expect(try EventsAnswer(server.postEvents(piledUp)).reasons == ["simultaneous_click"])
            #expect(server.stop() == 0)
        }
    }
}
