/// One of the seed's bugs, played once with each client: the feeds it registers, what the user
/// does, which ads to read back, and what to say about what the server cannot see.
struct Scenario: Sendable {
    enum Client: String, Sendable, CaseIterable {
        case buggy, fixed
    }

    let key: String
    let title: String
    /// The event type the table counts.
    let counts: Counts
    /// Says, after the table, what AdTally refused, what it cannot see, and what the client library does.
    let notes: [String]
    /// The feeds shown, in order, built from ad ids of this scenario and client.
    let feeds: @Sendable (_ ad: (String) -> String) -> [[FeedItem]]
    /// The user's actions. `show(i)` registers feed `i` with AdTally and puts it on screen;
    /// `register(i)` only registers it (the backend served a refresh the app has not displayed yet).
    let play: @MainActor @Sendable (_ controller: any FeedController, _ show: (Int) async throws -> Void,
                                    _ register: (Int) async throws -> Void) async throws -> Void

    enum Counts: Sendable {
        case impressions, clicks
    }

    static let advertisers = ["a": "acme", "b": "globex", "c": "initech", "d": "umbrella"]
    /// Each advertiser's landing page, in the shapes the click id must fit into without touching
    /// the rest (a query, a fragment, a bare host).
    static let landingPages = ["a": "https://acme.example/landing?c=9", "b": "https://globex.example/",
                               "c": "https://initech.example/offer?utm_source=feed#top", "d": "https://umbrella.example/landing"]

    static func ad(_ letter: String, _ id: (String) -> String) -> FeedItem {
        .ad(.init(id: id(letter), advertiser: advertisers[letter] ?? "acme",
                  url: landingPages[letter] ?? "https://acme.example/landing"))
    }

    /// The user looks at `rows` one after another, each well in view for 1.5 s (a viewable
    /// impression), from `time` (the controller's milliseconds); returns the time after. A person
    /// taps an ad they saw: since API 1.3 AdTally bills a click only for an ad whose impression it
    /// counted in the session (`no_impression` otherwise).
    @MainActor static func look(at rows: [Int], _ feed: any FeedController, from time: Int = 0) -> Int {
        var time = time
        for row in rows {
            feed.visible(row: row, fraction: 0.9, at: time)
            time += 1_500
            feed.idle(until: time)
            feed.visible(row: row, fraction: 0, at: time)
        }
        return time
    }

    static let all: [Scenario] = [
        Scenario(
            key: "pileup", title: "Handlers pile up on a reused cell: one tap, three clicks", counts: .clicks,
            notes: [
                "The buggy cell was configured for ads a, b and c (rows 1, 3, 5) and kept all three tap handlers:",
                "one tap sends three clicks in the same instant. Each is the first click on its ad, so without",
                "AdTally's tap rule (ADTALLY_TAP_WINDOW_MS) all three are billed; with it, the first click of the",
                "instant is billed and the other two are duplicates (simultaneous_click). The user saw all three ads",
                "as they scrolled, so their impressions count and API 1.3's impression rule lets the clicks reach",
                "the tap rule. The server cannot know which ad the finger was on: it bills the first, ad a, while",
                "the user tapped c. The fixed client sends one click, for c. AdTallyClient stamps each click's",
                "occurred_at at the call, which is what lets the server see the three as one instant, and sends",
                "them in one batch.",
            ],
            feeds: { id in [[.post(title: "Hello"), ad("a", id), .post(title: "News"), ad("b", id), .post(title: "Weather"), ad("c", id)]] },
            play: { feed, show, _ in
                try await show(0)
                for row in 0..<6 { feed.configure(row: row) } // the user scrolls; one cell serves every row
                _ = look(at: [1, 3, 5], feed)
                feed.tapCell()
            }),
        Scenario(
            key: "stale", title: "A tap handler keeps its row number across a refresh", counts: .clicks,
            notes: [
                "The cell showed ad a at row 1; the feed refreshed (ad d of another advertiser is now at row 1,",
                "a moved to row 3) and the user tapped a before the cell was configured again. The buggy handler",
                "reads items[1]: one click for d at d's real row in the current snapshot. Row and snapshot are",
                "right, so before API 1.3 AdTally billed umbrella for acme's tap. Now it refuses it: d was never",
                "on screen, so its impression was never counted (no_impression). Had the user seen d, no server",
                "could tell; AdTallyClient's part is the shape of the call: click(adID:) takes the ad's id, which",
                "the fixed controller looks up when the tap happens (a at row 3), never a row. On a shorter feed",
                "the same handler would have crashed the app (index out of range).",
            ],
            feeds: { id in [
                [.post(title: "Hello"), ad("a", id), .post(title: "News")],
                [.post(title: "Hello"), ad("d", id), .post(title: "News"), ad("a", id)],
            ] },
            play: { feed, show, _ in
                try await show(0)
                feed.configure(row: 1)
                _ = look(at: [1], feed)
                try await show(1) // the refresh is on screen; the tapped cell still shows a
                feed.tapCell()
            }),
        Scenario(
            key: "appearance", title: "An impression on every appearance", counts: .impressions,
            notes: [
                "The user scrolled down, up and down again, then pulled to refresh (the same ads, a new",
                "snapshot): the buggy willDisplay reported an impression at each of the four appearances. AdTally",
                "bills one per ad per session, so the repeats are duplicates (impression_already_counted). What",
                "it cannot see is that ad b only flashed past (never half visible for a second): an impression",
                "without visibility fields is taken on the client's word, so b is billed. The fixed client's",
                "ViewabilityTracker sends only ads at least half visible for one continuous second, once, with",
                "visible_fraction and visible_ms, which AdTally checks (not_viewable otherwise).",
            ],
            feeds: { id in [
                [ad("a", id), .post(title: "Hello"), ad("b", id), .post(title: "News"), .post(title: "Sport"), ad("c", id)],
                [ad("a", id), .post(title: "Hello"), ad("b", id), .post(title: "News"), .post(title: "Sport"), ad("c", id)],
            ] },
            play: { feed, show, _ in
                try await show(0)
                var time = 0
                for pass in 0..<4 {
                    if pass == 3 { try await show(1) } // pull to refresh: reloadData() displays the rows again
                    // a and c stay in view for 1.5 s; b is flicked past in 0.4 s.
                    for row in pass % 2 == 0 ? [0, 2, 5] : [5, 2, 0] {
                        feed.visible(row: row, fraction: 0.9, at: time)
                        time += row == 2 ? 400 : 1500
                        feed.idle(until: time)
                        feed.visible(row: row, fraction: 0, at: time)
                    }
                }
            }),
        Scenario(
            key: "post", title: "A post opens the old ad", counts: .clicks,
            notes: [
                "The cell showed ad a, then was reused for a post; the post branch reset nothing, so tapping the",
                "post ran the ad's handler: one click on a, at a's real row in the current snapshot. It is",
                "indistinguishable from a real tap, and billed. Only the controller can fix it (prepareForReuse",
                "clears the handler); the fixed client sends nothing and opens the post.",
            ],
            feeds: { id in [[ad("a", id), .post(title: "Hello")]] },
            play: { feed, show, _ in
                try await show(0)
                feed.configure(row: 0)
                _ = look(at: [0], feed)
                feed.configure(row: 1) // the same cell now shows the post
                feed.tapCell()
            }),
        Scenario(
            key: "race", title: "Not a bug: a tap that raced a refresh", counts: .clicks,
            notes: [
                "The feed backend registered a refresh (without ad a) a moment before the app displayed it, and",
                "the user tapped ad a on the feed still on screen. Both clients send one click naming the snapshot",
                "on screen (the app tells the tracker at display time, setSnapshot). With AdTally's grace window",
                "(ADTALLY_CLICK_GRACE_SECONDS) the click is judged against the feed the user saw and billed; a",
                "server without it judges it against the new feed and rejects a real tap (ad_not_in_feed, as a",
                "is not in it). AdTallyClient's part: the snapshot it names is the one displayed, and occurred_at",
                "is on the server's clock, which the window judges.",
            ],
            feeds: { id in [
                [.post(title: "Hello"), ad("a", id), .post(title: "News"), ad("b", id)],
                [.post(title: "Hello"), ad("b", id), .post(title: "News")],
            ] },
            play: { feed, show, register in
                try await show(0)
                feed.configure(row: 1)
                _ = look(at: [1], feed)
                try await register(1)
                feed.tapCell()
            }),
    ]
}
