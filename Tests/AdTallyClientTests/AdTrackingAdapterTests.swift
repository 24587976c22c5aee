@testable import AdTallyClient
import Foundation
import Testing

/// The feed controller's own seam, as the app declares it.
@MainActor protocol AdTracking {
    func track(_ event: String, _ properties: [String: Any])
}

extension AdTrackingAdapter: AdTracking {}

@MainActor @Suite(.timeLimit(.minutes(5))) struct AdTrackingAdapterTests {
    /// The controller's calls become events with the tracker's session and snapshot; what cannot be
    /// an event is reported, not sent.
    @Test func controllerCallsBecomeEvents() async throws {
        let fixture = try TrackerFixture()
        let analytics: any AdTracking = AdTrackingAdapter(tracker: fixture.tracker)
        analytics.track("ad_impression", ["id": "ad-1"])
        analytics.track("ad_click", ["id": "ad-1", "position": 3])
        try fixture.tracker.setSnapshot("snap-2")
        analytics.track("ad_click", ["id": "ad-2", "position": NSNumber(value: 7)])
        analytics.track("ad_impression", ["id": "ad-3", "visible_fraction": 0.75, "visible_ms": 1200])
        analytics.track("ad_hover", ["id": "ad-1"])
        analytics.track("ad_click", ["position": 1])
        analytics.track("ad_click", ["id": "ad-1", "position": "3"])
        analytics.track("ad_click", ["id": "bad id"])

        let flush = Task { await fixture.tracker.flush() }
        let events = try ServerAnswers.events(in: try await fixture.acceptNext())
        #expect(await flush.value == .delivered)
        #expect(events.map { $0["type"] as? String } == ["impression", "click", "click", "impression"])
        #expect(events.map { $0["ad_id"] as? String } == ["ad-1", "ad-1", "ad-2", "ad-3"])
        #expect(events.map { $0["snapshot_id"] as? String } == ["snap-1", "snap-1", "snap-2", "snap-2"])
        #expect(events.map { $0["position"] as? Int } == [nil, 3, 7, nil])
        #expect(events.allSatisfy { $0["session_id"] as? String == "sess-1" })
        #expect(events[3]["visible_fraction"] as? Double == 0.75)
        #expect(events[3]["visible_ms"] as? Int == 1200)

        let adapter = try #require(analytics as? AdTrackingAdapter)
        #expect(adapter.failures == [
            .unknownEvent("ad_hover"), .missingAdID(event: "ad_click"), .invalidProperty("position"),
            .tracking(.invalidIdentifier(field: "ad_id", value: "bad id")),
        ])
        await fixture.shutdown()
    }

    /// The seam returns nothing, so the adapter keeps the last click for the landing page: set by a
    /// tracked click (the id the server receives), kept through impressions, cleared by a click that
    /// was not tracked, so that no ad's page gets another click's id.
    @Test func lastClickGivesTheLandingPageItsClickID() async throws {
        let fixture = try TrackerFixture()
        let adapter = AdTrackingAdapter(tracker: fixture.tracker)
        #expect(adapter.lastClick == nil)
        adapter.track("ad_click", ["id": "ad-1", "position": 3])
        let click = try #require(adapter.lastClick)
        adapter.track("ad_impression", ["id": "ad-2"])
        #expect(adapter.lastClick == click)
        adapter.track("ad_click", ["id": "bad id"])
        #expect(adapter.lastClick == nil)

        let flush = Task { await fixture.tracker.flush() }
        let events = try ServerAnswers.events(in: try await fixture.acceptNext())
        #expect(await flush.value == .delivered)
        #expect(click.adID == "ad-1")
        #expect(events.map { $0["type"] as? String } == ["click", "impression"])
        #expect(events.first?["event_id"] as? String == click.clickID)
        await fixture.shutdown()
    }
}
