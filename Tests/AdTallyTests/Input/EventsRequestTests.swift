@testable import AdTally
import Contract
import Testing
import Timestamps

/// Section 2 of the contract, rule 1, and the shape of the `POST /v1/events` body.
@Suite(.timeLimit(.minutes(3))) struct EventsRequestTests {
    /// 2026-11-29T13:50:00Z (`date -u -d … +%s` = 1795960200).
    static let now = Timestamp(microsecondsSinceEpoch: 1_795_960_200_000_000)
    static let eventID = "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e"

    /// The contract's example event, members in its order, as raw JSON values.
    static let example: [(String, String)] = [
        ("event_id", #""5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e""#),
        ("type", #""impression""#),
        ("session_id", #""sess-9f2""#),
        ("ad_id", #""ad-42""#),
        ("occurred_at", #""2026-11-29T13:47:00.250Z""#),
        ("snapshot_id", #""feed-2026-11-29-0001""#),
        ("position", "3"),
        ("visible_fraction", "0.8"),
        ("visible_ms", "1200"),
    ]

    enum Change: Sendable {
        case set(String, String)
        case remove(String)
    }

    /// The example with members replaced, removed or appended (as raw JSON).
    static func event(_ changes: Change...) -> String {
        var members = example
        for change in changes {
            switch change {
            case .set(let name, let json):
                if let index = members.firstIndex(where: { $0.0 == name }) { members[index].1 = json } else { members.append((name, json)) }
            case .remove(let name):
                members.removeAll { $0.0 == name }
            }
        }
        return "{" + members.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}"
    }

    static func decodeOne(_ body: String) throws -> EventCandidate {
        let request = try EventsRequest.decode(body: Array(body.utf8), now: now)
        #expect(request.candidates.count == 1)
        return try #require(request.candidates.first)
    }

    // MARK: - Valid events

    @Test func contractExampleIsValid() throws {
        let candidate = try Self.decodeOne(Self.event())
        #expect(candidate == .valid(EventInput(
            eventID: Self.eventID, type: .impression, sessionID: "sess-9f2", adID: "ad-42",
            occurredAt: Timestamp(microsecondsSinceEpoch: 1_795_960_020_250_000),
            snapshotID: "feed-2026-11-29-0001", position: 3,
            visibility: Visibility(fraction: 0.8, milliseconds: 1200))))
    }

    @Test func uppercaseEventIDIsStoredLowercase() throws {
        let candidate = try Self.decodeOne(Self.event(.set("event_id", #""5F0C8A1E-7F3B-4A52-9D7E-0C1F2B3A4D5E""#)))
        #expect(candidate.echoID == Self.eventID)
        guard case .valid(let event) = candidate else { Issue.record("\(candidate)"); return }
        #expect(event.eventID == Self.eventID)
    }

    @Test func requiredMembersOnly() throws {
        let candidate = try Self.decodeOne(Self.event(.remove("snapshot_id"), .remove("position"), .remove("visible_fraction"), .remove("visible_ms")))
        guard case .valid(let event) = candidate else { Issue.record("\(candidate)"); return }
        #expect(event.snapshotID == nil && event.position == nil && event.visibility == nil)
    }

    @Test func nullOptionalsCountAsAbsent() throws {
        let candidate = try Self.decodeOne(Self.event(.set("snapshot_id", "null"), .set("position", "null"),
                                                      .set("visible_fraction", "null"), .set("visible_ms", "null")))
        guard case .valid(let event) = candidate else { Issue.record("\(candidate)"); return }
        #expect(event.snapshotID == nil && event.position == nil && event.visibility == nil)
    }

    @Test(arguments: [
        ("both missing", [Change.remove("visible_fraction"), .remove("visible_ms")]),
        ("fraction a string, ms an array", [Change.set("visible_fraction", #""x""#), .set("visible_ms", "[1]")]),
        ("only fraction", [Change.remove("visible_ms")]),
        ("only ms", [Change.remove("visible_fraction")]),
        ("fraction 7, ms -1", [Change.set("visible_fraction", "7"), .set("visible_ms", "-1")]),
    ])
    func clicksIgnoreVisibilityEntirely(_ name: String, _ changes: [Change]) throws {
        var members = Self.example
        for change in changes + [.set("type", #""click""#)] {
            switch change {
            case .set(let key, let json):
                if let index = members.firstIndex(where: { $0.0 == key }) { members[index].1 = json } else { members.append((key, json)) }
            case .remove(let key):
                members.removeAll { $0.0 == key }
            }
        }
        let body = "{" + members.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}"
        let candidate = try Self.decodeOne(body)
        guard case .valid(let event) = candidate else { Issue.record("\(candidate)"); return }
        #expect(event.type == .click)
        #expect(event.visibility == nil)
    }

    struct FractionCase: CustomTestStringConvertible, Sendable {
        let json: String
        let value: Double
        var testDescription: String { json }
    }

    @Test(arguments: [
        FractionCase(json: "1", value: 1), FractionCase(json: "0", value: 0), FractionCase(json: "-0", value: 0),
        FractionCase(json: "-0.0", value: 0), FractionCase(json: "1e0", value: 1), FractionCase(json: "1.0", value: 1),
        FractionCase(json: "0.5", value: 0.5), FractionCase(json: "5E-1", value: 0.5), FractionCase(json: "1e-400", value: 0),
    ])
    func visibleFractionAcceptsAnyNumberFromZeroToOne(_ testCase: FractionCase) throws {
        let candidate = try Self.decodeOne(Self.event(.set("visible_fraction", testCase.json)))
        guard case .valid(let event) = candidate else { Issue.record("\(candidate)"); return }
        let fraction = try #require(event.visibility?.fraction)
        #expect(fraction == testCase.value)
        #expect(fraction.sign == .plus)
    }

    @Test(arguments: ["0", "1000", "86400000"])
    func visibleMillisecondsInRange(_ json: String) throws {
        let candidate = try Self.decodeOne(Self.event(.set("visible_ms", json)))
        guard case .valid(let event) = candidate else { Issue.record("\(candidate)"); return }
        #expect(event.visibility?.milliseconds == Int32(json))
    }

    @Test(arguments: ["0", "2147483647"])
    func positionInRange(_ json: String) throws {
        let candidate = try Self.decodeOne(Self.event(.set("position", json)))
        guard case .valid(let event) = candidate else { Issue.record("\(candidate)"); return }
        #expect(event.position == Int32(json))
    }

    @Test(arguments: [
        ("now - 7 days exactly", #""2026-11-22T13:50:00Z""#),
        ("now + 10 minutes exactly", #""2026-11-29T14:00:00Z""#),
        ("now + 10 minutes exactly, with an offset", #""2026-11-29T15:00:00+01:00""#),
        ("now", #""2026-11-29T13:50:00.000000Z""#),
    ])
    func occurredAtWindowIsInclusive(_ name: String, _ json: String) throws {
        let candidate = try Self.decodeOne(Self.event(.set("occurred_at", json)))
        guard case .valid = candidate else { Issue.record("\(name): \(candidate)"); return }
    }

    @Test func duplicateKeysInAnEventReadTheLastValue() throws {
        let body = Self.event().replacingOccurrences(of: #""type": "impression""#, with: #""type": "click", "type": "impression""#)
        let candidate = try Self.decodeOne(body)
        #expect(candidate.typeForMetrics == .impression)
    }

    // MARK: - Rule 1 failures

    struct Invalid: CustomTestStringConvertible, Sendable {
        let name: String
        let body: String
        let echoID: String?
        let field: String
        let type: EventType?
        var testDescription: String { name }
    }

    static let id = eventID
    static let invalid: [Invalid] = [
        Invalid(name: "empty object", body: "{}", echoID: nil, field: "event_id", type: nil),
        Invalid(name: "event_id missing", body: event(.remove("event_id")), echoID: nil, field: "event_id", type: .impression),
        Invalid(name: "event_id null", body: event(.set("event_id", "null")), echoID: nil, field: "event_id", type: .impression),
        Invalid(name: "event_id number", body: event(.set("event_id", "42")), echoID: nil, field: "event_id", type: .impression),
        Invalid(name: "event_id object", body: event(.set("event_id", "{}")), echoID: nil, field: "event_id", type: .impression),
        Invalid(name: "event_id not a UUID: echoed as sent", body: event(.set("event_id", #""Not-A-UUID""#)), echoID: "Not-A-UUID", field: "event_id", type: .impression),
        Invalid(name: "event_id UUID without hyphens: echoed as sent", body: event(.set("event_id", #""5F0C8A1E7F3B4A529D7E0C1F2B3A4D5E""#)), echoID: "5F0C8A1E7F3B4A529D7E0C1F2B3A4D5E", field: "event_id", type: .impression),
        Invalid(name: "bad event_id before bad type", body: event(.set("event_id", "1"), .set("type", #""view""#)), echoID: nil, field: "event_id", type: nil),
        Invalid(name: "type missing; valid uppercase id echoed lowercase", body: event(.remove("type"), .set("event_id", #""5F0C8A1E-7F3B-4A52-9D7E-0C1F2B3A4D5E""#)), echoID: id, field: "type", type: nil),
        Invalid(name: "type wrong case", body: event(.set("type", #""Impression""#)), echoID: id, field: "type", type: nil),
        Invalid(name: "type unknown", body: event(.set("type", #""view""#)), echoID: id, field: "type", type: nil),
        Invalid(name: "type number", body: event(.set("type", "1")), echoID: id, field: "type", type: nil),
        Invalid(name: "type null", body: event(.set("type", "null")), echoID: id, field: "type", type: nil),
        Invalid(name: "session_id missing", body: event(.remove("session_id")), echoID: id, field: "session_id", type: .impression),
        Invalid(name: "session_id out of form", body: event(.set("session_id", #""sess 9f2""#)), echoID: id, field: "session_id", type: .impression),
        Invalid(name: "session_id empty", body: event(.set("session_id", #""""#)), echoID: id, field: "session_id", type: .impression),
        Invalid(name: "bad session_id before bad ad_id", body: event(.set("session_id", "1"), .set("ad_id", "2")), echoID: id, field: "session_id", type: .impression),
        Invalid(name: "ad_id missing", body: event(.remove("ad_id")), echoID: id, field: "ad_id", type: .impression),
        Invalid(name: "ad_id 129 chars", body: event(.set("ad_id", "\"\(String(repeating: "a", count: 129))\"")), echoID: id, field: "ad_id", type: .impression),
        Invalid(name: "click with bad ad_id keeps its type for metrics", body: event(.set("type", #""click""#), .set("ad_id", "null")), echoID: id, field: "ad_id", type: .click),
        Invalid(name: "occurred_at missing", body: event(.remove("occurred_at")), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "occurred_at number", body: event(.set("occurred_at", "1795960020")), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "occurred_at without offset", body: event(.set("occurred_at", #""2026-11-29T13:47:00""#)), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "occurred_at with space separator", body: event(.set("occurred_at", #""2026-11-29 13:47:00Z""#)), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "occurred_at 1 µs before now - 7 days", body: event(.set("occurred_at", #""2026-11-22T13:49:59.999999Z""#)), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "occurred_at 1 µs after now + 10 minutes", body: event(.set("occurred_at", #""2026-11-29T14:00:00.000001Z""#)), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "occurred_at years off", body: event(.set("occurred_at", #""2020-01-01T00:00:00Z""#)), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "bad occurred_at before bad position", body: event(.set("occurred_at", "null"), .set("position", "-1")), echoID: id, field: "occurred_at", type: .impression),
        Invalid(name: "snapshot_id out of form", body: event(.set("snapshot_id", #""feed/1""#)), echoID: id, field: "snapshot_id", type: .impression),
        Invalid(name: "snapshot_id number", body: event(.set("snapshot_id", "5")), echoID: id, field: "snapshot_id", type: .impression),
        Invalid(name: "snapshot_id empty", body: event(.set("type", #""click""#), .set("snapshot_id", #""""#)), echoID: id, field: "snapshot_id", type: .click),
        Invalid(name: "position 3.0", body: event(.set("position", "3.0")), echoID: id, field: "position", type: .impression),
        Invalid(name: "position 3e0", body: event(.set("position", "3e0")), echoID: id, field: "position", type: .impression),
        Invalid(name: "position negative", body: event(.set("position", "-1")), echoID: id, field: "position", type: .impression),
        Invalid(name: "position 2147483648", body: event(.set("position", "2147483648")), echoID: id, field: "position", type: .impression),
        Invalid(name: "position huge", body: event(.set("position", String(repeating: "9", count: 10_000))), echoID: id, field: "position", type: .impression),
        Invalid(name: "position string", body: event(.set("position", #""3""#)), echoID: id, field: "position", type: .impression),
        Invalid(name: "click position checked", body: event(.set("type", #""click""#), .set("position", "1.5")), echoID: id, field: "position", type: .click),
        Invalid(name: "bad position before half visibility pair", body: event(.set("position", "true"), .remove("visible_ms")), echoID: id, field: "position", type: .impression),
        Invalid(name: "visible_fraction above 1", body: event(.set("visible_fraction", "1.0000001")), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "visible_fraction negative", body: event(.set("visible_fraction", "-0.1")), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "visible_fraction string", body: event(.set("visible_fraction", #""0.8""#)), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "visible_fraction bool", body: event(.set("visible_fraction", "true")), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "visible_fraction 1e400", body: event(.set("visible_fraction", "1e400")), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "bad visible_fraction before bad visible_ms", body: event(.set("visible_fraction", "2"), .set("visible_ms", "-1")), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "visible_ms 1000.0 is not an integer", body: event(.set("visible_ms", "1000.0")), echoID: id, field: "visible_ms", type: .impression),
        Invalid(name: "visible_ms 1e3 is not an integer", body: event(.set("visible_ms", "1e3")), echoID: id, field: "visible_ms", type: .impression),
        Invalid(name: "visible_ms negative", body: event(.set("visible_ms", "-1")), echoID: id, field: "visible_ms", type: .impression),
        Invalid(name: "visible_ms over a day", body: event(.set("visible_ms", "86400001")), echoID: id, field: "visible_ms", type: .impression),
        Invalid(name: "visible_ms string", body: event(.set("visible_ms", #""1200""#)), echoID: id, field: "visible_ms", type: .impression),
        Invalid(name: "half pair: only visible_fraction", body: event(.remove("visible_ms")), echoID: id, field: "visible_ms", type: .impression),
        Invalid(name: "half pair: only visible_ms", body: event(.remove("visible_fraction")), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "half pair: visible_ms null", body: event(.set("visible_ms", "null")), echoID: id, field: "visible_ms", type: .impression),
        Invalid(name: "half pair: visible_fraction null", body: event(.set("visible_fraction", "null")), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "half pair: only an invalid visible_ms", body: event(.remove("visible_fraction"), .set("visible_ms", #""x""#)), echoID: id, field: "visible_fraction", type: .impression),
        Invalid(name: "half pair: only an invalid visible_fraction", body: event(.set("visible_fraction", "2"), .remove("visible_ms")), echoID: id, field: "visible_fraction", type: .impression),
    ]

    @Test(arguments: invalid)
    func ruleOneNamesTheFirstBadMember(_ testCase: Invalid) throws {
        let candidate = try Self.decodeOne(testCase.body)
        guard case .invalid(let echoID, let field, let message, let type) = candidate else {
            Issue.record("\(testCase.name) was valid")
            return
        }
        #expect(echoID == testCase.echoID)
        #expect(field == testCase.field)
        #expect(type == testCase.type)
        // Every message is a sentence about that member, naming it first.
        #expect(message.hasPrefix(testCase.field + " "), "\(testCase.name): \(message)")
    }

    /// The message tells apart the ways one member can fail (the contract's two examples first),
    /// which `field` alone cannot.
    @Test(arguments: [
        ("occurred_at from 2020", event(.set("occurred_at", #""2020-01-01T00:00:00Z""#)), "occurred_at is older than 7 days"),
        ("occurred_at with a space", event(.set("occurred_at", #""2026-11-29 13:47:00Z""#)),
         "occurred_at is not an RFC 3339 timestamp with an offset"),
        ("occurred_at without offset", event(.set("occurred_at", #""2026-11-29T13:47:00""#)),
         "occurred_at is not an RFC 3339 timestamp with an offset"),
        ("occurred_at 11 minutes ahead", event(.set("occurred_at", #""2026-11-29T14:01:00Z""#)),
         "occurred_at is more than 10 minutes ahead of the server clock"),
        ("occurred_at missing", event(.remove("occurred_at")), "occurred_at is missing"),
        ("occurred_at a number", event(.set("occurred_at", "1795960200")), "occurred_at must be a string"),
        ("event_id missing", event(.remove("event_id")), "event_id is missing"),
        ("event_id null", event(.set("event_id", "null")), "event_id is null"),
        ("event_id braced", event(.set("event_id", #""{5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e}""#)),
         "event_id is not a UUID in canonical form (8-4-4-4-12 hexadecimal digits)"),
        ("type view", event(.set("type", #""view""#)), "type must be impression or click"),
        ("session_id with a slash", event(.set("session_id", #""a/b""#)),
         "session_id must be 1 to 128 characters from A-Z a-z 0-9 . _ : ~ -"),
        ("ad_id a number", event(.set("ad_id", "42")), "ad_id must be a string"),
        ("snapshot_id empty", event(.set("snapshot_id", #""""#)),
         "snapshot_id must be 1 to 128 characters from A-Z a-z 0-9 . _ : ~ -"),
        ("position 3.0", event(.set("position", "3.0")), "position must be a JSON integer from 0 to 2147483647"),
        ("visible_fraction 2", event(.set("visible_fraction", "2")), "visible_fraction must be a number from 0 to 1"),
        ("visible_ms 1e3", event(.set("visible_ms", "1e3")), "visible_ms must be a JSON integer from 0 to 86400000"),
        ("only visible_fraction", event(.remove("visible_ms")),
         "visible_ms is missing; an impression with visible_fraction needs both visibility fields"),
        ("only visible_ms", event(.remove("visible_fraction")),
         "visible_fraction is missing; an impression with visible_ms needs both visibility fields"),
    ])
    func ruleOneSaysWhatIsWrong(_ name: String, _ body: String, _ expected: String) throws {
        guard case .invalid(_, _, let message, _) = try Self.decodeOne(body) else {
            Issue.record("\(name) was valid")
            return
        }
        #expect(message == expected, "\(name)")
    }

    // MARK: - Whole body

    @Test(arguments: [
        ("empty body", ""), ("not JSON", "event"), ("empty array", "[]"), ("array of an event", "[\(event())]"),
        ("string", #""x""#), ("null", "null"), ("number", "1"), ("truncated", "{\"event_id\": "),
        ("events empty", #"{"events": []}"#), ("events null", #"{"events": null}"#),
        ("events object", #"{"events": {}}"#), ("events string", #"{"events": "[]"}"#),
        ("501 events", "{\"events\": [\(Array(repeating: "{}", count: 501).joined(separator: ","))]}"),
        ("NaN inside an event", "{\"visible_fraction\": NaN}"),
        ("trailing comma in batch", "{\"events\": [\(event()),]}"),
    ])
    func malformedBodies(_ name: String, _ body: String) {
        do {
            _ = try EventsRequest.decode(body: Array(body.utf8), now: Self.now)
            Issue.record("\(name) was accepted")
        } catch {
            #expect(!error.message.isEmpty, "a malformed_json answer says why")
        }
    }

    @Test func invalidUTF8IsMalformed() {
        let body = Array(#"{"events": [{"event_id": ""#.utf8) + [0xFF, 0xFE] + Array(#""}]}"#.utf8)
        #expect(throws: EventsRequest.Malformed(message: "The body is not valid JSON: invalid UTF-8 at byte 26.")) {
            try EventsRequest.decode(body: body, now: Self.now)
        }
    }

    @Test func batchKeepsRequestOrderAndMarksNonObjects() throws {
        let body = "{\"events\": [\(Self.event()), 5, {}, \"str\", null, [], \(Self.event(.set("type", #""click""#)))]}"
        let request = try EventsRequest.decode(body: Array(body.utf8), now: Self.now)
        #expect(request.isBatch)
        #expect(request.candidates.count == 7)
        #expect(request.candidates[0].typeForMetrics == .impression)
        let notAnObject = EventCandidate.invalid(echoID: nil, field: nil, message: "the batch entry is not a JSON object", typeForMetrics: nil)
        #expect(request.candidates[1] == notAnObject)
        #expect(request.candidates[2] == .invalid(echoID: nil, field: "event_id", message: "event_id is missing", typeForMetrics: nil))
        #expect(request.candidates[3] == notAnObject)
        #expect(request.candidates[4] == notAnObject)
        #expect(request.candidates[5] == notAnObject)
        guard case .valid(let click) = request.candidates[6] else { Issue.record("\(request.candidates[6])"); return }
        #expect(click.type == .click)
    }

    @Test func singleEventIsABatchOfOne() throws {
        let request = try EventsRequest.decode(body: Array(Self.event().utf8), now: Self.now)
        #expect(!request.isBatch)
        #expect(request.candidates.count == 1)
    }

    @Test func anObjectWithEventsIsABatchEvenWithEventMembers() throws {
        let body = #"{"event_id": "\#(Self.eventID)", "events": [{}]}"#
        let request = try EventsRequest.decode(body: Array(body.utf8), now: Self.now)
        #expect(request.isBatch)
        #expect(request.candidates == [.invalid(echoID: nil, field: "event_id", message: "event_id is missing", typeForMetrics: nil)])
    }

    @Test(arguments: [1, 500])
    func batchSizeLimitsAreInclusive(_ count: Int) throws {
        let body = "{\"events\": [\(Array(repeating: Self.event(), count: count).joined(separator: ","))]}"
        let request = try EventsRequest.decode(body: Array(body.utf8), now: Self.now)
        #expect(request.candidates.count == count)
    }

    /// A realistic worst case: 500 events padded with unknown members to just under 1 MiB.
    @Test func oneMebibyteBatchOf500Events() throws {
        let padding = String(repeating: "p", count: 1_800)
        let one = Self.event(.set("client_debug", "\"\(padding)\""))
        let body = Array("{\"events\": [\(Array(repeating: one, count: 500).joined(separator: ","))]}".utf8)
        #expect(body.count > 900_000 && body.count <= 1_048_576)
        let request = try EventsRequest.decode(body: body, now: Self.now)
        #expect(request.candidates.count == 500)
        #expect(request.candidates.allSatisfy { if case .valid = $0 { true } else { false } })
    }
}
