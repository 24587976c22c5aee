@testable import AdTally
import JSON
import Testing

/// The events decoder reads a body in one pass of the JSON tokenizer. It must answer exactly what a
/// plain reading of the contract gives: the body parsed into a tree first, then section 2's rules
/// applied to the tree (`reference`, written here and nowhere else), for every body, malformed or
/// not, the message of a `malformed_json` included.
@Suite(.timeLimit(.minutes(3))) struct EventsDecoderTests {
    static let now = EventsRequestTests.now

    typealias Answer = Result<EventsRequest, EventsRequest.Malformed>

    static func decoded(_ body: String) -> Answer {
        Result { () throws(EventsRequest.Malformed) in try EventsRequest.decode(body: Array(body.utf8), now: now) }
    }

    /// Section 2 read plainly: the whole body parsed, then an object with `events` a batch of 1 to
    /// 500 entries (each an object, or an invalid event), any other object one event.
    static func reference(_ body: String) -> Answer {
        let document: JSONValue
        do {
            document = try JSONParser.parse(Array(body.utf8))
        } catch {
            return .failure(EventsRequest.Malformed(message: "The body is not valid JSON: \(error.description)."))
        }
        guard case .object(let members) = document else {
            return .failure(EventsRequest.Malformed(message: "The body must be a JSON object: one event, or {\"events\": [...]}."))
        }
        guard let events = members["events"] else {
            return .success(EventsRequest(candidates: [WellFormedRule.check(EventMembers(members), now: now)], isBatch: false))
        }
        guard case .array(let entries) = events else {
            return .failure(EventsRequest.Malformed(message: "events must be an array of 1 to 500 events."))
        }
        guard (1...500).contains(entries.count) else {
            return .failure(EventsRequest.Malformed(message: "events has \(entries.count) entries; it must have 1 to 500."))
        }
        return .success(EventsRequest(candidates: entries.map { entry in
            guard case .object(let event) = entry else {
                return .invalid(echoID: nil, field: nil, message: WellFormedRule.Message.notAnObject, typeForMetrics: nil)
            }
            return WellFormedRule.check(EventMembers(event), now: now)
        }, isBatch: true))
    }

    static func fast(_ body: String) -> EventsRequest? { try? decoded(body).get() }
    static func general(_ body: String) -> EventsRequest? { try? reference(body).get() }

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

    @Test func agreesOnTheUnusualShapes() {
        let event = EventsRequestTests.event()
        var unusual: [String] = []
        unusual.append("{\"type\": \"click\", " + event.dropFirst())                               // repeated member
        unusual.append(EventsRequestTests.event(.set("session_id", #""s\u002d1""#)))                 // escape
        unusual.append(EventsRequestTests.event(.set("ad_id", #""ad-é""#)))                           // non-ASCII
        unusual.append(EventsRequestTests.event(.set("events", "null")))                              // events inside an event
        unusual.append(EventsRequestTests.event(.set("extra", #"{"a": [1, {"b": []}]}"#)))            // nested value
        unusual.append(EventsRequestTests.event(.set("position", "1" + String(repeating: "0", count: 60))))  // long number
        unusual.append(EventsRequestTests.event(.set(#"event_\u0069d"#, #""x""#)))                  // a key with an escape
        unusual += [#"{"events": []}"#, #"{"events": [1]}"#, #"{"events": [{}], "x": 1}"#, "[]", "", "\u{FEFF}{}", "{} x",
                    #"{"events": [{}]"#, #"{"events": [{}], "events": 7}"#, #"{"events": 7, "events": [{}]}"#, "5", #""x""#, "[1, 2"]
        let many: String = Array(repeating: "{}", count: 501).joined(separator: ",")
        unusual.append(#"{"events": ["# + many + "]}")
        let arrays: String = Array(repeating: "[1]", count: 600).joined(separator: ",")
        unusual.append(#"{"events": ["# + arrays + "]}")
        for body in unusual {
            #expect(Self.decoded(body) == Self.reference(body), "disagree on: \(body.prefix(80))")
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

        var decoded = 0, total = 0
        for _ in 0..<6_000 {
            let original = body()
            for candidate in [original, mutate(original)] {
                total += 1
                let answer = Self.decoded(candidate)
                if case .success = answer { decoded += 1 }
                #expect(answer == Self.reference(candidate), "disagree on: \(candidate)")
            }
        }
        // Both kinds of answer are compared: many bodies decoded, many malformed.
        #expect(decoded > total / 10)
        #expect(decoded < total * 9 / 10)
    }
}

extension EventMembers {
    /// The members rule 1 reads, from a parsed object (the reference's reading).
    init(_ object: [String: JSONValue]) {
        self.init()
        eventID = object["event_id"]
        type = object["type"]
        sessionID = object["session_id"]
        adID = object["ad_id"]
        occurredAt = object["occurred_at"]
        snapshotID = object["snapshot_id"]
        position = object["position"]
        visibleFraction = object["visible_fraction"]
        visibleMilliseconds = object["visible_ms"]
    }
}
