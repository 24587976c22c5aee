import AdTallyClient
import Foundation

/// A server with one session whose feed holds `ads` ads (`ad-0` at row 0, `ad-1` at row 1, ...),
/// and trackers pointed at it (or at a proxy in front of it): the set-up of the client tests.
struct ClientScenario {
    let server: ServerProcess
    let session: String
    let snapshot = "feed-1"
    /// A journal directory of the scenario's own (not created; the tracker creates it).
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("adtally-e2e-client-\(UUID().uuidString)")

    static func start(ads: Int) throws -> ClientScenario {
        let server = try ServerProcess.start()
        let scenario = ClientScenario(server: server, session: "sess-client-\(UUID().uuidString.prefix(8).lowercased())")
        let feed = try server.putFeed(scenario.session, snapshot: scenario.snapshot,
                                      ads: (0..<ads).map { Body.ad("ad-\($0)", $0, "acme") })
        guard feed.status == 201 else {
            server.kill()
            throw HTTPClientError(description: "feed registration answered \(feed.status): \(feed.text)")
        }
        return scenario
    }

    /// Kills the server and removes the journal directory (for `defer`).
    func finish() {
        server.kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A tracker on this scenario's session, with retries capped at 1 s to keep the tests short.
    func tracker(endpoint: URL, storage: TrackerStorage, configure: (inout TrackerConfiguration) -> Void = { _ in })
        throws -> AdTallyTracker
    {
        var configuration = TrackerConfiguration(endpoint: endpoint, storage: storage)
        configuration.backoffCap = .seconds(1)
        configure(&configuration)
        let tracker = try AdTallyTracker(configuration: configuration)
        try tracker.setSession(session, snapshotID: snapshot)
        return tracker
    }

    /// Billable, duplicate and rejected impressions over every ad, as AdTally's listing reports them.
    func impressionTotals() throws -> (billable: Int, duplicate: Int, rejected: Int) {
        let listing = try server.request("GET", "/v1/reports/ads", headers: [Body.auth])
        guard listing.status == 200, let rows = listing.json?["rows"] as? [[String: Any]] else {
            throw HTTPClientError(description: "listing answered \(listing.status): \(listing.text.prefix(500))")
        }
        func sum(_ key: String) -> Int { rows.reduce(0) { $0 + ($1[key] as? Int ?? 0) } }
        return (sum("impressions"), sum("duplicate_impressions"), sum("rejected_impressions"))
    }
}

/// The system's clocks with the wall clock moved by `offset`: a phone whose date is wrong.
struct SkewedClock: TrackerClock {
    let offset: TimeInterval
    private let system = SystemClock()

    func now() -> Date { system.now().addingTimeInterval(offset) }
    func uptime() -> Duration { system.uptime() }
    func sleep(until deadline: Duration) async throws { try await system.sleep(until: deadline) }
}
