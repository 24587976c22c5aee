@testable import AdTally
import JSON
import Testing

/// The price of a body in the events bucket, found by a scan before any event is decoded, must be
/// exactly what the decode makes it (a batch's entries, 1 for a single event or a body that is not
/// a batch): a refusal priced differently would refuse what the contract lets through, or let
/// through what it refuses.
@Suite(.timeLimit(.minutes(3))) struct EventsCostTests {
    static let now = EventsRequestTests.now

    /// The contract's price, from the decode itself.
    static func decodedCost(_ bytes: [UInt8]) -> Int {
        (try? EventsRequest.decode(body: bytes, now: now)).map(\.candidates.count) ?? 1
    }

    @Test(arguments: [
        (#"{"events":[{},{}]}"#, 2),
        (EventsRequestTests.event(), 1),
        ("{}", 1),
        (#"{"events":[]}"#, 1),                                  // not a batch: malformed, costs 1
        (#"{"events":null}"#, 1),
        (#"{"events":[1,"x",null,[],{}]}"#, 5),                  // entries that are not events still count
        (#"{"events":[{},{}],"events":{}}"#, 1),                 // a repeated key keeps its last value
        (#"{"events":{},"events":[{},{},{}]}"#, 3),
        (#"{"\u0065vents":[{},{}]}"#, 2),                        // keys compare after their escapes
        (#"{"x":{"events":[{},{}]}}"#, 1),                       // only the top level's member
        (#"{"events":[{"events":[{},{}]}]}"#, 1),
        (#"{"events":[{},{}]} x"#, 1),                           // trailing data: malformed
        (#"{"events":[{},{}],"bad":"\ud800"}"#, 1),              // a lone surrogate anywhere: malformed
        (#"[{},{}]"#, 1),
        ("", 1),
    ])
    func pricesAsTheDecodeDoes(_ body: String, _ cost: Int) {
        let bytes = Array(body.utf8)
        #expect(EventsRequest.cost(ofBody: bytes) == cost, "\(body)")
        #expect(Self.decodedCost(bytes) == cost, "the decode disagrees with the table: \(body)")
    }

    @Test func theBatchBoundsAreTheDecodes() {
        for count in [1, 499, 500, 501, 2_000] {
            let bytes = Array(("{\"events\":[" + Array(repeating: "{}", count: count).joined(separator: ",") + "]}").utf8)
            #expect(EventsRequest.cost(ofBody: bytes) == Self.decodedCost(bytes), "\(count) entries")
            #expect(EventsRequest.cost(ofBody: bytes) == (count <= 500 ? count : 1), "\(count) entries")
        }
    }

    /// Generated batches (real events, junk, repeated and escaped keys, nesting) and each one
    /// mutated: the scan's price and the decode's agree on every body, and the scan fails on
    /// exactly the bodies the parser fails on, with the same error.
    @Test func agreesWithTheDecodeOnGeneratedAndMutatedBodies() {
        var random = EventsDecoderTests.Generator(state: 0xC057_0F_B0D1E5)
        func pick<T>(_ list: [T]) -> T { list[Int(random.next() % UInt64(list.count))] }
        let entries = [EventsRequestTests.event(), "{}", "1", "null", "[]", #"{"events":[{}]}"#, #""s""#,
                       #"{"junk":0.5,"padding":"zzzz"}"#, #"{"event_id":"not-a-uuid","type":"view"}"#, "[[[[1]]]]"]
        let keys = [#""events""#, #""\u0065vents""#, #""Events""#, #""x""#, #""events ""#]
        let spaces = ["", "", " ", "\n", "\t"]
        func batch() -> String {
            let count = pick([0, 1, 2, 3, 7, 499, 500, 501])
            return "[" + (0..<count).map { _ in pick(spaces) + pick(entries) }.joined(separator: ",") + "]"
        }
        func body() -> String {
            switch random.next() % 5 {
            case 0: return pick(entries)
            case 1: return "{" + pick(keys) + ":" + batch() + "}"
            case 2: return "{" + (0..<Int(1 + random.next() % 3)).map { _ in pick(keys) + pick(spaces) + ":" + pick([batch(), "{}", "null", "3"]) }
                .joined(separator: ",") + "}"
            case 3: return batch()
            default: return "{\"x\":" + pick(entries) + ",\"events\":" + batch() + pick(["", ",\"y\":[]"]) + "}" + pick(spaces)
            }
        }
        let significant: [UInt8] = Array("{}[]\":,\\ 0e.-nu".utf8) + [0x80, 0xED, 0x00]
        func mutate(_ bytes: [UInt8]) -> [UInt8] { random.mutate(bytes, with: significant) }
        var batches = 0, failures = 0, total = 0
        for _ in 0..<1_500 {
            let original = Array(body().utf8)
            for candidate in [original, mutate(original)] {
                total += 1
                let cost = EventsRequest.cost(ofBody: candidate)
                #expect(cost == Self.decodedCost(candidate), "disagree on: \(String(decoding: candidate.prefix(200), as: UTF8.self))")
                if cost > 1 { batches += 1 }
                let scanned = Result { () throws(JSONParseError) in try JSONParser.scanMember("events", in: candidate) }
                let parsed = Result { () throws(JSONParseError) in try JSONParser.parse(candidate) }
                switch (scanned, parsed) {
                case (.failure(let a), .failure(let b)): #expect(a == b)
                case (.success, .success): break
                default:
                    failures += 1
                    Issue.record("scan and parse disagree on validity: \(String(decoding: candidate.prefix(200), as: UTF8.self))")
                }
            }
        }
        // Both kinds of answer are exercised: many batches priced above 1, many bodies at 1.
        #expect(batches > total / 10)
        #expect(batches < total * 9 / 10)
        #expect(failures == 0)
    }
}
