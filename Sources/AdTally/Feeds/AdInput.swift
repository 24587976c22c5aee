/// One ad of a feed snapshot, validated: what the store records for `(snapshot, ad)`.
public struct AdInput: Sendable, Hashable {
    /// An identifier (see `Identifier`), unique within its snapshot.
    public let adID: String
    /// The ad's row in the whole feed, 0…2,147,483,647 (PostgreSQL `integer`), unique within its snapshot.
    public let position: Int32
    /// An identifier; an ad belongs to one advertiser forever (checked by the store, not here).
    public let advertiserID: String
    /// An acceptable landing URL (see `LandingURL`), exactly as sent.
    public let url: String

    public init(adID: String, position: Int32, advertiserID: String, url: String) {
        self.adID = adID
        self.position = position
        self.advertiserID = advertiserID
        self.url = url
    }
}
