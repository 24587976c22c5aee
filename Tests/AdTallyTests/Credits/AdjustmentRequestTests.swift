@testable import AdTally
import Testing
import Timestamps

/// `POST /v1/adjustments` bodies: each broken rule names its member, in the documented order.
@Suite(.timeLimit(.minutes(3))) struct AdjustmentRequestTests {
    static let valid = #"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-12-01T00:00:00+01:00","session_ids":["s-1"]}"#

    static func field(_ body: String) -> String? {
        do {
            _ = try AdjustmentRequest.decode(body: Array(body.utf8))
            return nil
        } catch {
            switch error {
            case .malformedJSON: return "malformed_json"
            case .invalid(let invalid): return invalid.field
            }
        }
    }

    @Test(arguments: [
        ("not json", "malformed_json"),
        ("[1]", "malformed_json"),
        (#"{"reason":"sivt"}"#, "adjustment_id"),
        (#"{"adjustment_id":"a b","reason":"sivt"}"#, "adjustment_id"),
        (#"{"adjustment_id":7}"#, "adjustment_id"),
        (#"{"adjustment_id":"a-1"}"#, "reason"),
        (#"{"adjustment_id":"a-1","reason":"fraud"}"#, "reason"),
        (#"{"adjustment_id":"a-1","reason":"sivt","note":5}"#, "note"),
        (#"{"adjustment_id":"a-1","reason":"sivt","note":"\#(String(repeating: "x", count: 501))"}"#, "note"),
        (#"{"adjustment_id":"a-1","reason":"sivt"}"#, "from"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28"}"#, "from"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z"}"#, "to"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-28T00:00:00Z","ad_ids":["x"]}"#, "to"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z"}"#, "session_ids"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","session_ids":[]}"#, "session_ids"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","session_ids":"s-1"}"#, "session_ids"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","session_ids":["s-1","s 2"]}"#, "session_ids[1]"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","ad_ids":[null]}"#, "ad_ids[0]"),
        (#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","advertiser_id":""}"#, "advertiser_id"),
    ])
    func aBrokenRuleNamesItsMember(body: String, expected: String) {
        #expect(Self.field(body) == expected, "\(body.prefix(120))")
    }

    @Test func tooManyIdsAreRefused() {
        let ids = (0...AdjustmentRequest.maximumFilterIDs).map { "\"s-\($0)\"" }.joined(separator: ",")
        #expect(Self.field(#"{"adjustment_id":"a-1","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","session_ids":[\#(ids)]}"#) == "session_ids")
    }

    @Test func aValidBodyIsReadWithOptionalMembersAsNullAbsent() throws {
        let request = try AdjustmentRequest.decode(body: Array(Self.valid.utf8))
        #expect(request.adjustmentID == "a-1" && request.reason == .sivt && request.note == nil)
        #expect(request.to == Timestamp(rfc3339: "2026-11-30T23:00:00Z"))
        #expect(request.sessionIDs == ["s-1"] && request.adIDs == nil && request.advertiserID == nil)
        let withNulls = try AdjustmentRequest.decode(body: Array(#"{"adjustment_id":"a-1","reason":"operator_error","note":null,"ad_ids":null,"from":"2026-11-28T00:00:00Z","to":"2026-12-01T00:00:00Z","advertiser_id":"acme"}"#.utf8))
        #expect(withNulls.note == nil && withNulls.adIDs == nil && withNulls.advertiserID == "acme")
    }

    /// The same adjustment whatever the order, repeats and offsets it was written with; another
    /// note, range or filter is another request.
    @Test func theCanonicalFormIgnoresOrderRepeatsAndOffsets() throws {
        let a = try AdjustmentRequest.decode(body: Array(#"{"adjustment_id":"x","reason":"sivt","from":"2026-11-28T01:00:00+01:00","to":"2026-11-29T00:00:00Z","session_ids":["b","a","b"]}"#.utf8))
        let b = try AdjustmentRequest.decode(body: Array(#"{"adjustment_id":"x","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00.000Z","session_ids":["a","b"]}"#.utf8))
        let c = try AdjustmentRequest.decode(body: Array(#"{"adjustment_id":"x","reason":"sivt","note":"n","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","session_ids":["a","b"]}"#.utf8))
        let d = try AdjustmentRequest.decode(body: Array(#"{"adjustment_id":"x","reason":"sivt","from":"2026-11-28T00:00:00Z","to":"2026-11-29T00:00:00Z","ad_ids":["a","b"]}"#.utf8))
        #expect(a.canonical == b.canonical)
        #expect(a.canonical != c.canonical)
        #expect(a.canonical != d.canonical)
    }
}
