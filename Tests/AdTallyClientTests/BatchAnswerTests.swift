@testable import AdTallyClient
import Foundation
import Testing

@Suite(.timeLimit(.minutes(3))) struct BatchAnswerTests {
    static let events = (0..<2).map { (n: Int) in
        TrackedEvent(eventID: UUID(), type: .click, sessionID: "s", adID: "ad-\(n)", snapshotID: "f", position: n,
                     visibility: nil, deviceTimeMilliseconds: 0, correctionMilliseconds: nil)
    }
    static let ids = events.map { EventEncoder.lowercaseUUID($0.eventID) }

    static func response(_ status: Int, _ body: String = "", headers: [String: String] = [:]) -> TransportResult {
        .response(TransportResponse(status: status, headers: headers, body: Data(body.utf8)))
    }

    /// Every status class leads where the contract says.
    @Test(arguments: [
        (408, "retry"), (429, "retry"), (500, "retry"), (502, "retry"), (503, "retry"), (599, "retry"),
        (413, "split"), (400, "refuse"), (401, "refuse"), (404, "refuse"), (415, "refuse"), (422, "refuse"),
        (301, "retry"), (204, "retry"), (100, "retry"),
    ])
    func statuses(status: Int, expected: String) {
        let answer = BatchAnswer.classify(Self.response(status, #"{"error":{"code":"x","message":"y"}}"#), events: Self.events)
        switch (answer, expected) {
        case (.retry, "retry"), (.tooLarge, "split"): break
        case let (.refused(refusedStatus, code, message), "refuse"):
            #expect(refusedStatus == status && code == "x" && message == "y")
        default: Issue.record("\(status) gave \(answer)")
        }
    }

    @Test func noAnswerIsRetried() {
        #expect(BatchAnswer.classify(.failure("reset"), events: Self.events) == .retry(reason: "reset", retryAfter: nil))
        let busy = BatchAnswer.classify(Self.response(503, #"{"error":{"code":"unavailable","message":"m"}}"#,
                                                      headers: ["Retry-After": "3"]), events: Self.events)
        #expect(busy == .retry(reason: "503 unavailable", retryAfter: .seconds(3)))
    }

    /// The server's own shape, read by the scanner, and variations that only the general parser
    /// reads: both give the same outcomes.
    @Test(arguments: [
        #"{"accepted":1,"duplicate":0,"rejected":1,"results":[{"event_id":"ID0","status":"accepted"},{"event_id":"ID1","status":"rejected","reason":"invalid_event","field":"occurred_at","message":"too old"}]}"#,
        #" { "results" : [ { "event_id" : "ID0" , "status" : "accepted" } , { "status" : "rejected" , "event_id" : "ID1" , "reason" : "invalid_event" , "field" : "occurred_at" , "message" : "too old" } ] , "accepted" : 1 } "#,
        #"{"results":[{"event_id":"ID0","status":"accepted","extra":{"nested":[1,2]}},{"event_id":"ID1","status":"rejected","reason":"invalid_event","field":"occurred_at","message":"too \u006fld"}],"accepted":1.0}"#,
    ])
    func answersAgree(template: String) throws {
        let body = Data(template.replacingOccurrences(of: "ID0", with: Self.ids[0]).replacingOccurrences(of: "ID1", with: Self.ids[1]).utf8)
        let outcomes = try #require(BatchAnswer.outcomes(of: body, for: Self.events))
        #expect(outcomes.map(\.status) == [.accepted, .rejected])
        #expect(outcomes[1].reason == "invalid_event" && outcomes[1].field == "occurred_at" && outcomes[1].message == "too old")
        #expect(outcomes.map(\.eventID) == Self.events.map(\.eventID))
        if let scanned = AnswerScanner.results(Array(body)), let parsed = BatchAnswer.parsedResults(body) {
            #expect(scanned.map(\.id) == parsed.map(\.id), "the scanner and the parser disagree")
            #expect(scanned.map(\.status) == parsed.map(\.status) && scanned.map(\.reason) == parsed.map(\.reason)
                && scanned.map(\.field) == parsed.map(\.field) && scanned.map(\.message) == parsed.map(\.message))
        }
    }

    /// The scanner reads the server's shape and leaves everything else to the parser.
    @Test func scannerScope() {
        #expect(AnswerScanner.results(Array(#"{"accepted":0,"results":[]}"#.utf8)) == [])
        #expect(AnswerScanner.results(Array(#"{"results":[{"event_id":null,"status":"rejected"}]}"#.utf8))
            == [AnswerScanner.Result(eventID: nil, status: "rejected")])
        #expect(AnswerScanner.results(Array(#"{"results":[{"event_id":"abc","status":"accepted"}]}"#.utf8))?.map(\.id) == ["abc"])
        for other in [#"{"results":[{"status":"a\"b"}]}"#, #"{"accepted":1.5,"results":[]}"#, #"{"results":[{"x":1}]}"#,
                      #"{"results":[]"#, #"[]"#, #"{"results":[],"results":[]}"#, ""] {
            #expect(AnswerScanner.results(Array(other.utf8)) == nil, "\(other)")
        }
    }

    /// Answers that do not fit the batch are not taken for its outcomes.
    @Test func mismatches() {
        let one = #"{"results":[{"event_id":"\#(Self.ids[0])","status":"accepted"}]}"#
        let swapped = #"{"results":[{"event_id":"\#(Self.ids[1])","status":"accepted"},{"event_id":"\#(Self.ids[0])","status":"accepted"}]}"#
        let unknown = #"{"results":[{"event_id":"\#(Self.ids[0])","status":"maybe"},{"event_id":"\#(Self.ids[1])","status":"accepted"}]}"#
        for body in [one, swapped, unknown, "not json", ""] {
            #expect(BatchAnswer.outcomes(of: Data(body.utf8), for: Self.events) == nil, "\(body)")
        }
    }
}
