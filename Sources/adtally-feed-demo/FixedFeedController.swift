import AdTallyClient

/// The seed's fixed controller: one closure per configure (set, not added), cleared in
/// `prepareForReuse`; the ad looked up by id when the tap happens; impressions from a
/// `ViewabilityTracker` (at least half visible for one continuous second), once per ad per session.
@MainActor final class FixedFeedController: FeedController {
    let cell = FeedCell()
    private var items: [FeedItem] = []
    private var viewability = ViewabilityTracker()
    private let analytics: any AdTracking
    private let tracker: AdTallyTracker

    init(analytics: any AdTracking, tracker: AdTallyTracker) {
        self.analytics = analytics
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
        guard let row = items.firstIndex(where: { $0.ad?.id == id }) else { return } // gone: nothing
        analytics.track("ad_click", ["id": id, "position": row])
    }

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
