/// What the scenarios drive: a feed controller with one cell in its reuse pool (every dequeue
/// hands back the same cell, as UIKit does once a row scrolls off), the way the seed's tests
/// reproduce cell reuse on demand.
@MainActor protocol FeedController: AnyObject {
    var cell: FeedCell { get }
    /// `didRefresh(with:)`: the items of a newly displayed snapshot.
    func show(_ items: [FeedItem], snapshotID: String)
    /// `cellForRowAt`: the pool's one cell is configured for `row`.
    func configure(row: Int)
    /// `willDisplay` and the scroll position: `row` is `fraction` visible from `time` (ms) on.
    func visible(row: Int, fraction: Double, at time: Int)
    /// The user taps the cell on screen.
    func tapCell()
    /// Time passes to `time` (ms) with nothing scrolling.
    func idle(until time: Int)
    /// The pages the app opened on taps, in order: the demo's `UIApplication.shared.open`. Each is
    /// the ad's URL with the click's id (API 1.5 conversions), or the bare URL if the click was not
    /// tracked (the person still reaches the ad; only the attribution is lost).
    var opened: [String] { get }
}
