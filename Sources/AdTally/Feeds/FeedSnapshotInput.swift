/// The body of `PUT /v1/sessions/{session_id}/feed`, validated against section 1 of the contract.
///
/// Construct it with `decode(body:)`: a value of this type has a well-formed `snapshot_id`, at most
/// 1,000 ads, and unique `ad_id`s and positions, so the store only checks what needs the database.
public struct FeedSnapshotInput: Sendable, Equatable {
    /// The most ads one snapshot may hold.
    public static let maximumAdCount = 1000

    public let snapshotID: String
    /// The ads in request order (may be empty: a feed with no ads).
    public let ads: [AdInput]

    public init(snapshotID: String, ads: [AdInput]) {
        self.snapshotID = snapshotID
        self.ads = ads
    }
}
