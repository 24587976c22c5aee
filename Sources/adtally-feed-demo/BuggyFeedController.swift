import AdTallyClient

/// The seed's feed controller before its fix: every configure adds a tap handler that captured the
/// row number and reads `items[row]` when it runs; the post branch resets nothing; `willDisplay`
/// reports an impression every time a row appears. Each handler that fires opens the landing page
/// of the ad it read, as the seed's `openAd` does.
@MainActor final class BuggyFeedController: FeedController {
    let cell = FeedCell()
    private(set) var opened: [String] = []
    private var items: [FeedItem] = []
    private var displayed = Set<Int>()
    private let adapter: AdTrackingAdapter
    private let tracker: AdTallyTracker
    /// What the real app would have done instead of sending (a crash on a stale row past the end).
    private(set) var crashes: [String] = []
    /// The seam the controller's code calls, as in the seed; the adapter behind it also keeps the
    /// last click, whose id goes into the landing URL.
    private var analytics: any AdTracking { adapter }

    init(analytics: AdTrackingAdapter, tracker: AdTallyTracker) {
        adapter = analytics
        self.tracker = tracker
    }

    func show(_ items: [FeedItem], snapshotID: String) {
        self.items = items
        try? tracker.setSnapshot(snapshotID)
        displayed.removeAll() // reloadData(): every visible row is displayed again
    }

    func configure(row: Int) {
        cell.prepareForReuse()
        switch items[row] {
        case let .post(title):
            cell.title = title // the leftover handlers stay
        case let .ad(ad):
            cell.title = ad.id
            cell.tapHandlers.append { [unowned self] in openAd(at: row) } // addAction adds, every time
        }
    }

    private func openAd(at row: Int) {
        guard row < items.count else {
            crashes.append("index \(row) out of range for \(items.count) rows")
            return
        }
        guard let ad = items[row].ad else { return }
        analytics.track("ad_click", ["id": ad.id, "position": row])
        open(adapter.lastClick?.landingURL(for: ad.url) ?? ad.url)
    }

    /// `UIApplication.shared.open`: the demo notes the URL instead of starting a browser.
    private func open(_ url: String) { opened.append(url) }

    func visible(row: Int, fraction: Double, at time: Int) {
        if fraction > 0 {
            // willDisplay: every appearance, and again after every reloadData()
            if displayed.insert(row).inserted, let ad = items[row].ad {
                analytics.track("ad_impression", ["id": ad.id, "position": row])
            }
        } else {
            displayed.remove(row)
        }
    }

    func tapCell() { cell.tap() }
    func idle(until time: Int) {}
}
