/// A row of the feed, as the seed's feed controller has it: posts and ads in one list, one cell
/// class for both.
enum FeedItem: Sendable {
    case post(title: String)
    case ad(Ad)

    /// An ad as the feed backend served it.
    struct Ad: Sendable {
        let id: String
        let advertiser: String
        let url: String
    }

    var ad: Ad? {
        if case let .ad(ad) = self { return ad }
        return nil
    }
}
