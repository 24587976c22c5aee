import AdTallyClient

/// The seed's feed controller before its fix: every configure adds a tap handler that captured the
/// row number and reads `items[row]` when it runs; the post branch resets nothing; `willDisplay`
/// reports an impression every time a row appears.
@MainActor final class BuggyFeedController: FeedController {
    let cell = FeedCell()
    private var items: [FeedItem] = []
    private var displayed = Set<Int>()
    private let analytics: any AdTracking
    private let tracker: AdTallyTracker
    /// What the real app would have done instead of sending (a crash on a stale row past the end).
    private(set) var crashes: [String] = []

    init(analytics: any AdTracking, tracker: AdTallyTracker) {
        self.analytics = analytics
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
    }

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
