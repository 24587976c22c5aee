import Foundation
import Testing

/// All end-to-end tests run one after another: each starts real processes, and the build machine
/// is small; timings (shutdown within 10 s, the click window) must not depend on neighbours. Each
/// suite below has a time limit of its own (the shortest applies); this one, the longest of them,
/// only covers a test that would be added without one.
@Suite(.serialized, .timeLimit(.minutes(10))) enum EndToEnd {}

/// The parts of a `POST /v1/events` answer the tests check.
struct EventsAnswer {
    let accepted: Int?
    let duplicate: Int?
    let rejected: Int?
    let results: [[String: Any]]

    init(_ response: HTTPResponse) throws {
        let object = try #require(response.json, "not a JSON object: \(response.status) \(response.text)")
        accepted = object["accepted"] as? Int
        duplicate = object["duplicate"] as? Int
        rejected = object["rejected"] as? Int
        results = try #require(object["results"] as? [[String: Any]], "no results: \(response.text)")
    }

    var statuses: [String?] { results.map { $0["status"] as? String } }
    var reasons: [String?] { results.map { $0["reason"] as? String } }
    var totals: [Int?] { [accepted, duplicate, rejected] }
}

extension ServerProcess {
    /// `POST /v1/events` with `body` as JSON.
    func postEvents(_ body: Any) throws -> HTTPResponse {
        try request("POST", "/v1/events", headers: [Body.jsonType], body: Body.json(body))
    }

    /// `PUT /v1/sessions/{session}/feed` with the admin token.
    func putFeed(_ session: String, snapshot: String, ads: [[String: Any]]) throws -> HTTPResponse {
        try request("PUT", "/v1/sessions/\(session)/feed", headers: [Body.jsonType, Body.auth],
                    body: Body.json(["snapshot_id": snapshot, "ads": ads]))
    }
}
