import Testing
@testable import AdTally

/// The direct decoder must answer exactly as the general parser does on every body it takes, and
/// take the bodies clients really send (else it saves nothing).
@Suite(.timeLimit(.minutes(3))) struct EventsFastDecoderTests {
    static let now = EventsRequestTests.now

    static func fast(_ body: String) -> EventsRequest? {
        Array(body.utf8).withUnsafeBufferPointer { EventsFastDecoder.decode($0, now: now) }
    }

    static func general(_ body: String) -> EventsRequest? {
        try? EventsRequest.decodeParsing(body: Array(body.utf8), now: now)
    }

    /// SplitMix64: a fixed seed gives the same bodies on every run, so a failure reproduces.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        /// `bytes` with one to three bytes removed, inserted or replaced, each inserted or new
        /// byte one of `significant` (the bytes a parser decides on).
        mutating func mutate(_ bytes: [UInt8], with significant: [UInt8]) -> [UInt8] {
            var bytes = bytes
            for _ in 0..<Int(1 + next() % 3) where !bytes.isEmpty {
                let at = Int(next() % UInt64(bytes.count))
                let byte = significant[Int(next() % UInt64(significant.count))]
                switch next() % 3 {
                case 0: bytes.remove(at: at)
                case 1: bytes.insert(byte, at: at)
                default: bytes[at] = byte
                }
            }
            return bytes
        }
    }

    @Test func takesWhatClientsSend() throws {
        let single = EventsRequestTests.event()
        let click = #"{"event_id":"5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e","type":"click","session_id":"s-1","ad_id":"ad-1","occurred_at":"2026-11-29T13:47:00Z","snapshot_id":"snap-1","position":3}"#
        let batch = "{\"events\": [\n  " + Array(repeating: single, count: 50).joined(separator: ",\n  ") + "\n]}\n"
        let withExtras = EventsRequestTests.event(.set("app_version", #""4.2.1""#), .set("debug", "true"), .set("retry", "null"))
        for body in [single, click, batch, withExtras, "{}", "{\"events\":[{}]}"] {
            let decoded = try #require(Self.fast(body), "declined: \(body.prefix(80))")
            #expect(decoded == Self.general(body))
        }
        #expect(Self.fast(batch)?.candidates.count == 50)
        #expect(Self.fast(batch)?.isBatch == true)
    }

    @Test func declinesWhatOnlyTheParserDecides() {
        let declined = [
            "{\"type\": \"click\", " + EventsRequestTests.event().dropFirst(),                   // repeated member
            EventsRequestTests.event(.set("session_id", #""s\u002d1""#)),                        // escape
            EventsRequestTests.event(.set("ad_id", #""ad-é""#)),                                  // non-ASCII
            EventsRequestTests.event(.set("events", "null")),                                     // events inside an event
            EventsRequestTests.event(.set("extra", "{}")),                                        // nested value
            EventsRequestTests.event(.set("position", "1" + String(repeating: "0", count: 60))),  // long number
            "{\"events\": []}", "{\"events\": [1]}", "{\"events\": [{}], \"x\": 1}", "[]", "", "\u{FEFF}{}", "{} x",
            "{\"events\": [" + Array(repeating: "{}", count: 501).joined(separator: ",") + "]}",
        ]
        for body in declined {
            #expect(Self.fast(body) == nil, "took: \(body.prefix(80))")
        }
    }

    @Test func agreesWithTheParserOnGeneratedAndMutatedBodies() {
        var random = Generator(state: 0x5EED_AD7A_11E5)
        let names = ["event_id", "type", "session_id", "ad_id", "occurred_at", "snapshot_id", "position",
                     "visible_fraction", "visible_ms", "events", "extra", "Type", "event_id ", ""]
        let values = [
            #""5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e""#, #""5F0C8A1E-7F3B-4A52-9D7E-0C1F2B3A4D5E""#, #""not-a-uuid""#,
            #""impression""#, #""click""#, #""view""#, #""sess-9f2""#, #""ad-42""#, #""""#, #""a b""#,
            #""2026-11-29T13:47:00.250Z""#, #""2026-11-29T13:47:00+01:00""#, #""2020-01-01T00:00:00Z""#, #""2026-13-01T00:00:00Z""#,
            "0", "-0", "3", "-1", "2147483647", "2147483648", "1200", "86400000", "86400001", "1000.0", "1e3",
            "0.8", "0.5e0", "1", "1e0", "1.5", "-0.0", "1e400", "1e-400", "12345678901234567890", "0.30000000000000004",
            "null", "true", "false", "{}", "[]", #""\u0041""#, #""é""#, #""tab\there""#,
        ]
        let spaces = ["", "", "", " ", "\n", "\t ", "\r\n"]
        func pick<T>(_ list: [T]) -> T { list[Int(random.next() % UInt64(list.count))] }
        func event() -> String {
            var members: [String] = []
            for _ in 0..<Int(random.next() % 12) {
                members.append(pick(spaces) + "\"" + pick(names) + "\"" + pick(spaces) + ":" + pick(spaces) + pick(values) + pick(spaces))
            }
            return "{" + members.joined(separator: ",") + "}"
        }
        func body() -> String {
            switch random.next() % 4 {
            case 0, 1: return pick(spaces) + event() + pick(spaces)
            case 2: return "{" + pick(spaces) + "\"events\"" + pick(spaces) + ":" + pick(spaces) + "["
                + (0..<Int(1 + random.next() % 4)).map { _ in pick(spaces) + event() + pick(spaces) }.joined(separator: ",") + "]}" + pick(spaces)
            default: return "{\"events\":[" + (0..<Int(random.next() % 3)).map { _ in pick(["{}", "1", "null", event()]) }.joined(separator: ",")
                + "]" + pick(["", ",\"x\":1", ",\"events\":[]"]) + "}"
            }
        }
        let significant: [UInt8] = Array("{}[]\":,\\ 0e.-nt".utf8) + [0x80, 0x00]
        func mutate(_ text: String) -> String {
            String(decoding: random.mutate(Array(text.utf8), with: significant), as: UTF8.self)
        }

        var taken = 0, total = 0
        for _ in 0..<6_000 {
            let original = body()
            for candidate in [original, mutate(original)] {
                total += 1
                guard let fast = Self.fast(candidate) else { continue }
                taken += 1
                #expect(Self.general(candidate) == fast, "disagree on: \(candidate)")
            }
        }
        // Both sides of the comparison are exercised: many bodies taken, many declined.
        #expect(taken > total / 10)
        #expect(taken < total * 9 / 10)
    }
}
