/// The body of `POST /v1/events`, decoded into one candidate per event in request order.
///
/// A JSON object with an `events` member is a batch, whose `events` must be an array of 1 to 500
/// entries (an `events` member that is `null` is a member that is not such an array: the body is
/// `malformed_json`, not a single event). Any other JSON object is a single event, however
/// incomplete (`{}` fails rule 1 at `event_id`). A batch entry that is not an object is an invalid
/// event without `field`.
public struct EventsRequest: Sendable, Hashable {
    /// The most events one batch may hold.
    public static let maximumBatchCount = 500

    /// One per event, in request order; never empty.
    public let candidates: [EventCandidate]
    /// Whether the body was `{"events": [...]}` rather than a single event object (the answer has
    /// the same shape either way; this is for logs).
    public let isBatch: Bool

    public init(candidates: [EventCandidate], isBatch: Bool) {
        self.candidates = candidates
        self.isBatch = isBatch
    }

    /// Decodes a request body. Throws `malformed_json` only for the whole-body failures of section 2;
    /// every per-event problem is an `.invalid` candidate. `now` is the server's clock (injected so
    /// tests are deterministic) for the `occurred_at` window.
    public static func decode(body: [UInt8], now: Timestamp) throws(InputError) -> EventsRequest {
        // Most bodies take the direct path; it declines anything unusual, which the parser below handles.
        if let request = body.withUnsafeBufferPointer({ EventsFastDecoder.decode($0, now: now) }) { return request }
        return try decodeParsing(body: body, now: now)
    }

    /// What the body costs in the events bucket (API.md section 6), without decoding its events:
    /// the number of candidates `decode(body:now:)` gives (a batch's entries, or 1 for a single
    /// event), or 1 when it throws (a body that is not a batch, or not readable, costs 1). The body
    /// is validated as the parser would (`JSONParser.scanMember`), so the two never disagree; a
    /// refused batch then costs a scan, not a decode.
    public static func cost(ofBody body: [UInt8]) -> Int {
        guard case .array(let count)? = try? JSONParser.scanMember("events", in: body),
              (1...maximumBatchCount).contains(count) else { return 1 }
        return count
    }

    /// `decode(body:now:)` through the general parser only (the fast path's tests compare with it).
    static func decodeParsing(body: [UInt8], now: Timestamp) throws(InputError) -> EventsRequest {
        let document: JSONValue
        do {
            document = try JSONParser.parse(body)
        } catch {
            throw .malformedJSON("The body is not valid JSON: \(error.description).")
        }
        return try decode(document, now: now)
    }

    /// Decodes an already parsed body (see `decode(body:now:)`).
    public static func decode(_ document: JSONValue, now: Timestamp) throws(InputError) -> EventsRequest {
        guard case .object(let members) = document else {
            throw .malformedJSON("The body must be a JSON object: one event, or {\"events\": [...]}.")
        }
        guard let events = members["events"] else {
            return EventsRequest(candidates: [WellFormedRule.check(members, now: now)], isBatch: false)
        }
        guard case .array(let entries) = events else {
            throw .malformedJSON("events must be an array of 1 to \(maximumBatchCount) events.")
        }
        guard (1...maximumBatchCount).contains(entries.count) else {
            throw .malformedJSON("events has \(entries.count) entries; it must have 1 to \(maximumBatchCount).")
        }
        let candidates = entries.map { entry -> EventCandidate in
            guard case .object(let event) = entry else {
                return .invalid(echoID: nil, field: nil, message: WellFormedRule.Message.notAnObject, typeForMetrics: nil)
            }
            return WellFormedRule.check(event, now: now)
        }
        return EventsRequest(candidates: candidates, isBatch: true)
    }
}
