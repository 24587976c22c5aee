// adtally-feed-demo: plays the seed's feed (posts and ads in one table, one cell reused for every
// row) over AdTallyClient twice, once with the buggy controller and once with the fixed one,
// registering feeds as a feed backend does, then prints, per bug, what AdTally's own reports say.
//
// Environment: ADTALLY_URL (default http://127.0.0.1:8080), ADTALLY_ADMIN_TOKEN (required),
// ADTALLY_DEMO_DIR (where the two trackers keep their journals; default: a temporary folder).
import AdTallyClient
import Foundation

// print: standard output is the demo's report to the person running it.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("adtally-feed-demo: \(message)\n".utf8))
    exit(1)
}

let environment = ProcessInfo.processInfo.environment
guard let baseURL = URL(string: environment["ADTALLY_URL"] ?? "http://127.0.0.1:8080") else { fail("bad ADTALLY_URL") }
guard let token = environment["ADTALLY_ADMIN_TOKEN"], !token.isEmpty else { fail("ADTALLY_ADMIN_TOKEN is not set") }
let journals = URL(fileURLWithPath: environment["ADTALLY_DEMO_DIR"] ?? NSTemporaryDirectory())
let backend = FeedBackend(baseURL: baseURL, token: token)
let run = String(UUID().uuidString.prefix(6)).lowercased()

var trackers: [Scenario.Client: AdTallyTracker] = [:]
var adapters: [Scenario.Client: AdTrackingAdapter] = [:]
do {
    for client in Scenario.Client.allCases {
        var configuration = TrackerConfiguration(endpoint: baseURL,
                                                 storage: .directory(journals.appendingPathComponent("journal-\(run)-\(client)")))
        configuration.backoffCap = .seconds(2)
        let tracker = try AdTallyTracker(configuration: configuration)
        trackers[client] = tracker
        adapters[client] = AdTrackingAdapter(tracker: tracker) { failure in print("  (\(client) client: not tracked: \(failure))") }
    }
} catch {
    fail("cannot start a tracker: \(error)")
}

print("AdTally at \(baseURL.absoluteString); the seed's feed, played with the buggy and the fixed controller.")
print("Every number below is read back from AdTally's reports (GET /v1/reports/ads/{ad_id}).\n")

var tables: [(Scenario, [(Scenario.Client, String, String)], [(Scenario.Client, String)])] = []
for scenario in Scenario.all {
    var ads: [(Scenario.Client, String, String)] = []
    var opened: [(Scenario.Client, String)] = []
    for client in Scenario.Client.allCases {
        guard let tracker = trackers[client], let adapter = adapters[client] else { fail("no tracker") }
        let session = "demo-\(run)-\(scenario.key)-\(client)"
        let adID = { (letter: String) in "\(run)-\(scenario.key)-\(client)-\(letter)" }
        let feeds = scenario.feeds(adID)
        let controller: any FeedController = client == .buggy
            ? BuggyFeedController(analytics: adapter, tracker: tracker)
            : FixedFeedController(analytics: adapter, tracker: tracker)
        do {
            try tracker.setSession(session)
            let snapshot = { (index: Int) in "\(session)-feed-\(index + 1)" }
            try await scenario.play(controller, { index in
                try await backend.register(session: session, snapshot: snapshot(index), items: feeds[index])
                controller.show(feeds[index], snapshotID: snapshot(index))
            }, { index in
                try await backend.register(session: session, snapshot: snapshot(index), items: feeds[index])
            })
        } catch {
            fail("\(scenario.key), \(client) client: \(error)")
        }
        if let buggy = controller as? BuggyFeedController {
            for crash in buggy.crashes { print("  (the buggy app would have crashed here: \(crash))") }
        }
        opened += controller.opened.map { (client, $0) }
        let letters = Set(feeds.flatMap { $0.compactMap(\.ad?.id) }).sorted()
        ads += letters.map { id in (client, String(id.split(separator: "-").last ?? ""), id) }
    }
    tables.append((scenario, ads, opened))
}

for (client, tracker) in trackers.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
    let result = await tracker.flush(retrying: true)
    guard result == .delivered else { fail("the \(client) client's events were not delivered: \(result)") }
}

var sawTapRule = false
for (number, (scenario, ads, opened)) in tables.enumerated() {
    var rows: [ReportTable.Row] = []
    for (client, letter, id) in ads {
        do {
            let report = try await backend.report(ad: id)
            if report.duplicates != nil { sawTapRule = true }
            rows.append(.init(client: client, letter: letter, advertiser: Scenario.advertisers[letter] ?? "", report: report))
        } catch {
            fail("\(error)")
        }
    }
    print("\(number + 1). \(scenario.title)")
    print(ReportTable(scenario: scenario, rows: rows).render())
    for note in scenario.notes { print("   \(note)") }
    if !opened.isEmpty {
        // The demo's browser: each tap opens the ad's url with the click's id, which the advertiser's
        // site keeps until the person converts and then posts to POST /v1/conversions (API 1.5).
        print("   Opened on the tap (the ad's url with adtally_click_id, the click's event_id):")
        for (client, url) in opened { print("     \(client) app: \(url)") }
    }
    print("")
}

if !sawTapRule {
    print("This server does not report duplicates by reason yet (no \"duplicates\" in its reports), so it")
    print("predates the tap rule and the click grace window: table 1's pile-up is billed in full there,")
    print("and table 5's raced tap is rejected.\n")
}
print("What each app team sees in its own AdTallyClient statistics:")
for (client, tracker) in trackers.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
    print("  \(client) client:")
    for line in tracker.statistics.summary.split(separator: "\n") { print("    \(line)") }
    await tracker.shutdown()
}
