import Dispatch
import Foundation
import TestSupport
import Testing

/// Results gathered from many threads. `@unchecked Sendable`: `items` is only touched under `lock`.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ item: String) { lock.lock(); items.append(item); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return items }
    func count(_ item: String) -> Int { all.filter { $0 == item }.count }
}

extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct MultiProcessConcurrency {
        /// API.md rule 6: fifty racing requests across two processes, exactly one accepted.
        @Test func fiftyRacingEventsAcrossTwoProcessesCountOnce() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            let first = try ServerProcess.start(databaseURL: database.connectionString, extra: ServerProcess.version1ClickRules)
            defer { first.kill() }
            let second = try ServerProcess.start(databaseURL: database.connectionString, extra: ServerProcess.version1ClickRules)
            defer { second.kill() }
            let ports = [first.port, second.port]
            let session = "race-session"
            let registered = try first.putFeed(session, snapshot: "race-feed", ads: [Body.ad("race-ad", 1, "acme")])
            #expect(registered.status == 201, "\(registered.text)")

            for type in ["impression", "click"] {
                let tally = Tally()
                // Built before the race so that every thread only sends.
                let bodies = (0..<50).map { _ in Body.json(Body.event(type, session: session, ad: "race-ad", snapshot: "race-feed", position: 1)) }
                DispatchQueue.concurrentPerform(iterations: 50) { index in
                    do {
                        let response = try HTTPClient.request(port: ports[index % 2], method: "POST", path: "/v1/events",
                                                              headers: [Body.jsonType], body: bodies[index])
                        guard response.status == 200,
                              let results = response.json?["results"] as? [[String: Any]], results.count == 1 else {
                            tally.add("http \(response.status): \(response.text)")
                            return
                        }
                        let status = results[0]["status"] as? String ?? "?"
                        let reason = results[0]["reason"] as? String
                        tally.add(reason.map { "\(status) \($0)" } ?? status)
                    } catch {
                        tally.add("error: \(error)")
                    }
                }
                let outcomes = tally.all
                let duplicateReason = type == "impression" ? "impression_already_counted" : "click_within_window"
                #expect(outcomes.count == 50)
                #expect(tally.count("accepted") == 1, "\(type): \(outcomes)")
                #expect(tally.count("duplicate \(duplicateReason)") == 49, "\(type): \(outcomes)")
            }
            #expect(first.stop() == 0)
            #expect(second.stop() == 0)
        }

        /// The seed's pile-up under the default rules: one tap on a cell reused for three ads fires
        /// three handlers at once, sent as three concurrent requests to two processes; one click is
        /// billed, the other two are `simultaneous_click`, and the reports say so.
        @Test func theSeedsPileUpAcrossTwoProcessesBillsOneClick() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            // API 1.2's defaults: the pile-up comes without impressions (1.3's defaults would refuse
            // every click as no_impression; SessionLifecycle.theSeedsScenariosUnder1_3 shows it).
            let first = try ServerProcess.start(databaseURL: database.connectionString, extra: ServerProcess.withoutClickRulesOf1_3)
            defer { first.kill() }
            let second = try ServerProcess.start(databaseURL: database.connectionString, extra: ServerProcess.withoutClickRulesOf1_3)
            defer { second.kill() }
            let ports = [first.port, second.port]
            let ads = ["pile-a", "pile-b", "pile-c"]
            let rounds = 10
            for round in 0..<rounds {
                let session = "pile-\(round)"
                let registered = try first.putFeed(session, snapshot: "pile-feed-\(round)",
                                                   ads: ads.enumerated().map { Body.ad($0.element, $0.offset + 1, "adv-\($0.offset)") })
                #expect(registered.status == 201, "\(registered.text)")
                let tapped = Body.now()
                let bodies = ads.enumerated().map { index, ad in
                    var click = Body.event("click", session: session, ad: ad, snapshot: "pile-feed-\(round)", position: index + 1)
                    click["occurred_at"] = tapped
                    return Body.json(click)
                }
                let tally = Tally()
                DispatchQueue.concurrentPerform(iterations: 3) { handler in
                    do {
                        let response = try HTTPClient.request(port: ports[(handler + round) % 2], method: "POST", path: "/v1/events",
                                                              headers: [Body.jsonType], body: bodies[handler])
                        let result = (response.json?["results"] as? [[String: Any]])?.first
                        let status = result?["status"] as? String ?? "http \(response.status)"
                        tally.add((result?["reason"] as? String).map { "\(status) \($0)" } ?? status)
                    } catch {
                        tally.add("error: \(error)")
                    }
                }
                #expect(tally.count("accepted") == 1, "round \(round): \(tally.all)")
                #expect(tally.count("duplicate simultaneous_click") == 2, "round \(round): \(tally.all)")
            }
            var clicks = 0, simultaneous = 0
            for ad in ads {
                let report = try first.request("GET", "/v1/reports/ads/\(ad)", headers: [Body.auth])
                #expect(report.status == 200, "\(report.text)")
                clicks += report.json?["clicks"] as? Int ?? -100
                simultaneous += (report.json?["duplicates"] as? [String: Any])?["simultaneous_click"] as? Int ?? -100
            }
            #expect(clicks == rounds)
            #expect(simultaneous == 2 * rounds)
            #expect(first.stop() == 0)
            #expect(second.stop() == 0)
        }
    }
}
