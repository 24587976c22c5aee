/// The moment an ad became viewable (at least `minimumFraction` visible for `minimumDuration`
/// without a break), with what was measured: hand it to `AdTallyTracker.impression`.
public struct ViewableImpression: Sendable, Hashable {
    /// The ad.
    public let adID: String
    /// The ad's row, as last given to `update` (nil if never given).
    public let position: Int?
    /// The lowest visible fraction during the run, and the run's length (`minimumDuration`).
    public let visibility: Visibility
    /// When the run reached `minimumDuration`, on the clock the times were given in.
    public let at: Duration

    /// An impression of the given parts.
    public init(adID: String, position: Int?, visibility: Visibility, at: Duration) {
        self.adID = adID
        self.position = position
        self.visibility = visibility
        self.at = at
    }
}
