import Contract
import JSON

/// "The same content" of section 1: the same set of `(ad_id, position, advertiser_id, url)` in any
/// order, unknown keys not counting.
///
/// The canonical form is the JSON text of an array of `[ad_id, position, advertiser_id, url]`
/// arrays sorted by `ad_id` in byte order (ad ids are unique in a snapshot, so that order is total):
/// `[["ad-42",3,"acme","https://acme.example/"],["ad-77",9,"globex","https://globex.example/"]]`.
/// Being JSON, it is unambiguous (no separator can be forged inside a value) and readable in a
/// database column or a log line. `snapshot_id` and the session are not part of it: the store
/// compares those separately.
extension FeedSnapshotInput {
    /// The canonical content text of this snapshot's ads.
    public var contentFingerprint: String {
        FeedSnapshotInput.contentFingerprint(of: ads)
    }

    /// The canonical content text of any list of ads (for example, rows read back from the store),
    /// so stored and incoming snapshots compare with `==`.
    public static func contentFingerprint(of ads: [AdInput]) -> String {
        let sorted = ads.sorted { lhs, rhs in
            if lhs.adID != rhs.adID { return lhs.adID.utf8Precedes(rhs.adID) }
            return lhs.position < rhs.position
        }
        var writer = JSONWriter(reservingCapacity: 64 * sorted.count + 2)
        writer.beginArray()
        for ad in sorted {
            writer.beginArray()
            writer.string(ad.adID)
            writer.int(ad.position)
            writer.string(ad.advertiserID)
            writer.string(ad.url)
            writer.endArray()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}
