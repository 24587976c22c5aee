@testable import AdTally
import Testing

/// Section 1 of the contract: `invalid_snapshot` names the first bad field in the order
/// `snapshot_id`, `ads`, then per ad `ad_id`, `position`, `advertiser_id`, `url`.
@Suite(.timeLimit(.minutes(3))) struct FeedSnapshotDecodingTests {
    static let ad0 = #"{"ad_id": "ad-42", "position": 3, "advertiser_id": "acme", "url": "https://acme.example/landing?c=9"}"#
    static let ad1 = #"{"ad_id": "ad-77", "position": 9, "advertiser_id": "globex", "url": "https://globex.example/"}"#
    static let contractExample = #"{"snapshot_id": "feed-2026-11-29-0001", "ads": [\#(ad0), \#(ad1)]}"#

    static func ad(_ id: String = #""ad-1""#, position: String = "1", advertiser: String = #""acme""#,
                   url: String = #""https://a.example/""#) -> String {
        #"{"ad_id": \#(id), "position": \#(position), "advertiser_id": \#(advertiser), "url": \#(url)}"#
    }

    static func snapshot(_ ads: [String], id: String = #""s-1""#) -> String {
        #"{"snapshot_id": \#(id), "ads": [\#(ads.joined(separator: ","))]}"#
    }

    static func manyAds(_ count: Int) -> [String] {
        (0..<count).map { ad(#""ad-\#($0)""#, position: "\($0)") }
    }

    enum Expected: Sendable, Equatable {
        case ok(adCount: Int)
        case malformed
        case invalid(String)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let body: [UInt8]
        let expected: Expected
        init(_ name: String, _ body: String, _ expected: Expected) {
            self.name = name; self.body = Array(body.utf8); self.expected = expected
        }
        init(_ name: String, bytes: [UInt8], _ expected: Expected) {
            self.name = name; self.body = bytes; self.expected = expected
        }
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        // Accepted.
        Case("contract example", contractExample, .ok(adCount: 2)),
        Case("no ads", #"{"snapshot_id": "s-1", "ads": []}"#, .ok(adCount: 0)),
        Case("exactly 1,000 ads", snapshot(manyAds(1000)), .ok(adCount: 1000)),
        Case("unknown keys ignored", #"{"snapshot_id": "s-1", "v": 2, "ads": [{"ad_id": "a", "position": 0, "advertiser_id": "b", "url": "https://a.example/", "extra": [null]}]}"#, .ok(adCount: 1)),
        Case("position 0 and 2147483647", snapshot([ad(#""a""#, position: "0"), ad(#""b""#, position: "2147483647")]), .ok(adCount: 2)),
        Case("repeated key: last value wins", #"{"snapshot_id": "bad id", "snapshot_id": "s-1", "ads": []}"#, .ok(adCount: 0)),
        Case("same advertiser and url on two ads", snapshot([ad(#""a""#, position: "1"), ad(#""b""#, position: "2")]), .ok(adCount: 2)),

        // malformed_json: not JSON, or not an object.
        Case("empty body", "", .malformed),
        Case("not JSON", "snapshot", .malformed),
        Case("array body", "[]", .malformed),
        Case("string body", #""x""#, .malformed),
        Case("null body", "null", .malformed),
        Case("truncated object", #"{"snapshot_id": "s-1""#, .malformed),
        Case("invalid UTF-8 in a value", bytes: Array(#"{"snapshot_id": ""#.utf8) + [0xC0, 0xAF] + Array(#"", "ads": []}"#.utf8), .malformed),
        Case("byte order mark", bytes: [0xEF, 0xBB, 0xBF] + Array(#"{"snapshot_id": "s-1", "ads": []}"#.utf8), .malformed),
        Case("trailing comma", #"{"snapshot_id": "s-1", "ads": [],}"#, .malformed),

        // snapshot_id first.
        Case("empty object", "{}", .invalid("snapshot_id")),
        Case("snapshot_id missing", #"{"ads": []}"#, .invalid("snapshot_id")),
        Case("snapshot_id null", #"{"snapshot_id": null, "ads": []}"#, .invalid("snapshot_id")),
        Case("snapshot_id number", #"{"snapshot_id": 5, "ads": []}"#, .invalid("snapshot_id")),
        Case("snapshot_id empty", #"{"snapshot_id": "", "ads": []}"#, .invalid("snapshot_id")),
        Case("snapshot_id 129 chars", #"{"snapshot_id": "\#(String(repeating: "s", count: 129))", "ads": []}"#, .invalid("snapshot_id")),
        Case("snapshot_id with slash", #"{"snapshot_id": "a/b", "ads": []}"#, .invalid("snapshot_id")),
        Case("bad snapshot_id before bad ads", #"{"snapshot_id": 1, "ads": 2}"#, .invalid("snapshot_id")),

        // ads.
        Case("ads missing", #"{"snapshot_id": "s-1"}"#, .invalid("ads")),
        Case("ads null", #"{"snapshot_id": "s-1", "ads": null}"#, .invalid("ads")),
        Case("ads object", #"{"snapshot_id": "s-1", "ads": {}}"#, .invalid("ads")),
        Case("ads string", #"{"snapshot_id": "s-1", "ads": "[]"}"#, .invalid("ads")),
        Case("1,001 ads", snapshot(manyAds(1001)), .invalid("ads")),
        Case("1,001 ads, the first one bad: count first", snapshot([ad("5")] + manyAds(1000)), .invalid("ads")),

        // An entry that is not an object.
        Case("ad entry is a number", snapshot(["5"]), .invalid("ads[0]")),
        Case("ad entry is null", snapshot([ad(), "null"]), .invalid("ads[1]")),
        Case("ad entry is an array", snapshot([ad(), "[]"]), .invalid("ads[1]")),

        // ad_id.
        Case("ad empty object: ad_id first", snapshot(["{}"]), .invalid("ads[0].ad_id")),
        Case("ad_id missing", snapshot([#"{"position": 1, "advertiser_id": "a", "url": "https://a.example/"}"#]), .invalid("ads[0].ad_id")),
        Case("ad_id null", snapshot([ad("null")]), .invalid("ads[0].ad_id")),
        Case("ad_id number", snapshot([ad("42")]), .invalid("ads[0].ad_id")),
        Case("ad_id out of form", snapshot([ad(#""ad 42""#)]), .invalid("ads[0].ad_id")),
        Case("bad ad_id before bad position", snapshot([ad("1", position: "-1")]), .invalid("ads[0].ad_id")),

        // position.
        Case("position missing", snapshot([#"{"ad_id": "a", "advertiser_id": "b", "url": "https://a.example/"}"#]), .invalid("ads[0].position")),
        Case("position null", snapshot([ad(position: "null")]), .invalid("ads[0].position")),
        Case("position string", snapshot([ad(position: #""3""#)]), .invalid("ads[0].position")),
        Case("position 3.0 is not an integer", snapshot([ad(position: "3.0")]), .invalid("ads[0].position")),
        Case("position 3e0 is not an integer", snapshot([ad(position: "3e0")]), .invalid("ads[0].position")),
        Case("position negative", snapshot([ad(position: "-1")]), .invalid("ads[0].position")),
        Case("position 2147483648", snapshot([ad(position: "2147483648")]), .invalid("ads[0].position")),
        Case("position with 10,000 digits", snapshot([ad(position: String(repeating: "9", count: 10_000))]), .invalid("ads[0].position")),
        Case("position 1e400", snapshot([ad(position: "1e400")]), .invalid("ads[0].position")),
        Case("bad position before bad advertiser_id", snapshot([ad(position: "true", advertiser: "null")]), .invalid("ads[0].position")),

        // advertiser_id, url.
        Case("advertiser_id missing", snapshot([#"{"ad_id": "a", "position": 1, "url": "https://a.example/"}"#]), .invalid("ads[0].advertiser_id")),
        Case("advertiser_id null", snapshot([ad(advertiser: "null")]), .invalid("ads[0].advertiser_id")),
        Case("advertiser_id out of form", snapshot([ad(advertiser: #""acme inc""#)]), .invalid("ads[0].advertiser_id")),
        Case("bad advertiser_id before bad url", snapshot([ad(advertiser: "[]", url: "1")]), .invalid("ads[0].advertiser_id")),
        Case("url missing", snapshot([#"{"ad_id": "a", "position": 1, "advertiser_id": "b"}"#]), .invalid("ads[0].url")),
        Case("url null", snapshot([ad(url: "null")]), .invalid("ads[0].url")),
        Case("url number", snapshot([ad(url: "1")]), .invalid("ads[0].url")),
        Case("url tel:", snapshot([ad(url: #""tel:+15551234567""#)]), .invalid("ads[0].url")),
        Case("url http:", snapshot([ad(url: #""http://a.example/""#)]), .invalid("ads[0].url")),
        Case("url javascript:", snapshot([ad(url: #""javascript:alert(1)""#)]), .invalid("ads[0].url")),
        Case("url with user info", snapshot([ad(url: #""https://u@a.example/""#)]), .invalid("ads[0].url")),
        Case("url non-ASCII via escape", snapshot([ad(url: #""https://a.example/\u00e9""#)]), .invalid("ads[0].url")),
        Case("url third ad", snapshot([ad(#""a""#, position: "1"), ad(#""b""#, position: "2"), ad(#""c""#, position: "3", url: #""myapp://x""#)]), .invalid("ads[2].url")),

        // Uniqueness: the later entry is to blame.
        Case("repeated ad_id", snapshot([ad(#""a""#, position: "1"), ad(#""a""#, position: "2")]), .invalid("ads[1].ad_id")),
        Case("repeated position", snapshot([ad(#""a""#, position: "1"), ad(#""b""#, position: "1")]), .invalid("ads[1].position")),
        Case("repeated ad_id at ads[5] of ads[2]", snapshot((0..<6).map { ad(#""ad-\#($0 == 5 ? 2 : $0)""#, position: "\($0)") }), .invalid("ads[5].ad_id")),
        Case("repeated position at ads[5] of ads[2]", snapshot((0..<6).map { ad(#""ad-\#($0)""#, position: "\($0 == 5 ? 2 : $0)") }), .invalid("ads[5].position")),
        Case("repeated ad_id before bad position of the same entry", snapshot([ad(#""a""#, position: "1"), ad(#""a""#, position: #""x""#)]), .invalid("ads[1].ad_id")),
        Case("repeated position before bad url of the same entry", snapshot([ad(#""a""#, position: "1"), ad(#""b""#, position: "1", url: "0")]), .invalid("ads[1].position")),
        Case("earlier entry's bad url before later repeated ad_id", snapshot([ad(#""a""#, position: "1", url: "0"), ad(#""a""#, position: "2")]), .invalid("ads[0].url")),
        Case("earlier non-object before later bad url", snapshot([ad(#""a""#), "true", ad(#""c""#, url: "0")]), .invalid("ads[1]")),
    ]

    @Test(arguments: cases)
    func decodes(_ testCase: Case) {
        let result = Result { () throws(FeedSnapshotInput.Refusal) in try FeedSnapshotInput(body: testCase.body) }
        switch (result, testCase.expected) {
        case (.success(let snapshot), .ok(let count)):
            #expect(snapshot.ads.count == count)
        case (.failure(.malformedJSON(let message)), .malformed):
            #expect(!message.isEmpty)
        case (.failure(.invalid(let badField, let message)), .invalid(let field)):
            #expect(badField == field)
            #expect(message.contains(field))
        default:
            Issue.record("got \(result), expected \(testCase.expected)")
        }
    }

    @Test func contractExampleDecodesToItsValues() throws {
        let snapshot = try FeedSnapshotInput(body: Array(Self.contractExample.utf8))
        #expect(snapshot == FeedSnapshotInput(snapshotID: "feed-2026-11-29-0001", ads: [
            AdInput(adID: "ad-42", position: 3, advertiserID: "acme", url: "https://acme.example/landing?c=9"),
            AdInput(adID: "ad-77", position: 9, advertiserID: "globex", url: "https://globex.example/"),
        ]))
    }

    // MARK: - Same content

    static func decoded(_ body: String) throws -> FeedSnapshotInput {
        try FeedSnapshotInput(body: Array(body.utf8))
    }

    @Test func sameContentInAnyOrderHasTheSameFingerprint() throws {
        let forward = try Self.decoded(Self.contractExample)
        let reversed = try Self.decoded(#"{"ads": [\#(Self.ad1), \#(Self.ad0)], "snapshot_id": "feed-2026-11-29-0001"}"#)
        let withUnknownKeys = try Self.decoded(#"{"snapshot_id": "feed-2026-11-29-0001", "x": 1, "ads": [{"z": true, "url": "https://globex.example/", "advertiser_id": "globex", "position": 9, "ad_id": "ad-77"}, \#(Self.ad0)]}"#)
        #expect(forward.contentFingerprint == reversed.contentFingerprint)
        #expect(forward.contentFingerprint == withUnknownKeys.contentFingerprint)
        #expect(forward.contentFingerprint == reversed.contentFingerprint)
        #expect(forward.contentFingerprint == #"[["ad-42",3,"acme","https://acme.example/landing?c=9"],["ad-77",9,"globex","https://globex.example/"]]"#)
        #expect(FeedSnapshotInput.contentFingerprint(of: reversed.ads.reversed()) == forward.contentFingerprint)
    }

    @Test(arguments: [
        ("another url", #"{"ad_id": "ad-77", "position": 9, "advertiser_id": "globex", "url": "https://globex.example/x"}"#),
        ("another position", #"{"ad_id": "ad-77", "position": 8, "advertiser_id": "globex", "url": "https://globex.example/"}"#),
        ("another advertiser", #"{"ad_id": "ad-77", "position": 9, "advertiser_id": "acme", "url": "https://globex.example/"}"#),
        ("another ad_id", #"{"ad_id": "ad-78", "position": 9, "advertiser_id": "globex", "url": "https://globex.example/"}"#),
        ("url case differs", #"{"ad_id": "ad-77", "position": 9, "advertiser_id": "globex", "url": "HTTPS://globex.example/"}"#),
    ])
    func differentContentHasADifferentFingerprint(_ name: String, _ changedAd: String) throws {
        let original = try Self.decoded(Self.contractExample)
        let changed = try Self.decoded(#"{"snapshot_id": "feed-2026-11-29-0001", "ads": [\#(Self.ad0), \#(changedAd)]}"#)
        #expect(original.contentFingerprint != changed.contentFingerprint)
        #expect(original.contentFingerprint != changed.contentFingerprint)
    }

    @Test func fewerAdsIsDifferentContent() throws {
        let original = try Self.decoded(Self.contractExample)
        let fewer = try Self.decoded(#"{"snapshot_id": "feed-2026-11-29-0001", "ads": [\#(Self.ad0)]}"#)
        let none = try Self.decoded(#"{"snapshot_id": "feed-2026-11-29-0001", "ads": []}"#)
        #expect(original.contentFingerprint != fewer.contentFingerprint)
        #expect(none.contentFingerprint == "[]")
    }

    @Test func fingerprintSortsAdIDsInByteOrder() {
        let ads = [AdInput(adID: "ad-9", position: 1, advertiserID: "x", url: "https://a.example/"),
                   AdInput(adID: "B", position: 2, advertiserID: "x", url: "https://a.example/"),
                   AdInput(adID: "ad-10", position: 3, advertiserID: "x", url: "https://a.example/"),
                   AdInput(adID: "a", position: 4, advertiserID: "x", url: "https://a.example/")]
        let fingerprint = FeedSnapshotInput.contentFingerprint(of: ads)
        #expect(fingerprint == #"[["B",2,"x","https://a.example/"],["a",4,"x","https://a.example/"],["ad-10",3,"x","https://a.example/"],["ad-9",1,"x","https://a.example/"]]"#)
    }
}
