import Dispatch
import Foundation
import Testing
import TestSupport

/// Results gathered from many threads. `@unchecked Sendable`: `items` is only touched under `lock`.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ item: String) { lock.lock(); items.append(item); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return items }
    func count(_ item: String) -> Int { all.filter { $0 == item }.count }
}

extension EndToEnd {
    @Suite struct MultiProcessConcurrency {
        /// API.md rule 6: fifty racing requests across two processes, exactly one accepted.
        @Test func fiftyRacingEventsAcrossTwoProcessesCountOnce() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            let first = try ServerProcess.start(databaseURL: database.connectionString)
            defer { first.kill() }
            let second = try ServerProcess.start(databaseURL: database.connectionString)
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
    }
}
