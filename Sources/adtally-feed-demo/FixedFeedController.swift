import AdTallyClient

/// The seed's fixed controller: one closure per configure (set, not added), cleared in
/// `prepareForReuse`; the ad looked up by id when the tap happens; impressions from a
/// `ViewabilityTracker` (at least half visible for one continuous second), once per ad per session;
/// the tapped ad's landing page opened with the click's id.
@MainActor final class FixedFeedController: FeedController {
    let cell = FeedCell()
    private(set) var opened: [String] = []
    private var items: [FeedItem] = []
    private var viewability = ViewabilityTracker()
    private let adapter: AdTrackingAdapter
    private let tracker: AdTallyTracker
    /// The seam the controller's code calls, as in the seed; the adapter behind it also keeps the
    /// last click, whose id goes into the landing URL.
    private var analytics: any AdTracking { adapter }

    init(analytics: AdTrackingAdapter, tracker: AdTallyTracker) {
        adapter = analytics
        self.tracker = tracker
    }

    func show(_ items: [FeedItem], snapshotID: String) {
        self.items = items
        try? tracker.setSnapshot(snapshotID) // when the new feed is on screen, not when it is fetched
    }

    func configure(row: Int) {
        cell.prepareForReuse()
        switch items[row] {
        case let .post(title):
            cell.title = title
        case let .ad(ad):
            cell.title = ad.id
            cell.onTap = { [unowned self] in openAd(id: ad.id) }
        }
    }

    private func openAd(id: String) {
        guard let row = items.firstIndex(where: { $0.ad?.id == id }), let ad = items[row].ad else { return } // gone: nothing
        analytics.track("ad_click", ["id": id, "position": row])
        open(adapter.lastClick?.landingURL(for: ad.url) ?? ad.url)
    }

    /// `UIApplication.shared.open`: the demo notes the URL instead of starting a browser.
    private func open(_ url: String) { opened.append(url) }

    func visible(row: Int, fraction: Double, at time: Int) {
        guard let ad = items[row].ad else { return }
        report(viewability.update(adID: ad.id, visibleFraction: fraction, position: row, at: .milliseconds(time)))
    }

    func idle(until time: Int) {
        report(viewability.advance(to: .milliseconds(time)))
    }

    private func report(_ impressions: [ViewableImpression]) {
        for impression in impressions {
            var properties: [String: Any] = ["id": impression.adID, "visible_fraction": impression.visibility.fraction,
                                             "visible_ms": impression.visibility.milliseconds]
            if let position = impression.position { properties["position"] = position }
            analytics.track("ad_impression", properties)
        }
    }

    func tapCell() { cell.tap() }
}
