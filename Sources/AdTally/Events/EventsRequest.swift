import JSON
import Timestamps

/// The body of `POST /v1/events`, decoded into one candidate per event in request order.
///
/// A JSON object with an `events` member is a batch, whose `events` must be an array of 1 to 500
/// entries (an `events` member that is `null` is a member that is not such an array: the body is
/// `malformed_json`, not a single event). Any other JSON object is a single event, however
/// incomplete (`{}` fails rule 1 at `event_id`). A batch entry that is not an object is an invalid
/// event without `field`. A repeated member keeps its last value, `events` included.
///
/// Read in one pass of the JSON tokenizer, straight into the members rule 1 reads: no tree of the
/// body and no dictionary per event is built (that was about a tenth of the server's CPU per event
/// under load), and unknown members are checked and skipped without decoding their text.
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

    /// Why a body is `400 malformed_json`: not JSON, not an object, or an `events` member that is
    /// not an array of 1 to 500 entries. Every problem of one event is a candidate instead.
    public struct Malformed: Error, Sendable, Equatable {
        public let message: String
    }

    /// Decodes a request body. `now` is the server's clock (injected so tests are deterministic) for
    /// the `occurred_at` window.
    public static func decode(body: [UInt8], now: Timestamp) throws(Malformed) -> EventsRequest {
        let read: Result<BodyShape, JSONParseError> = body.withUnsafeBufferPointer { buffer in
            var reader = EventsBodyReader(tokenizer: JSONTokenizer(bytes: buffer), now: now)
            return Result { () throws(JSONParseError) in try reader.body() }
        }
        switch read {
        case .failure(let error):
            throw Malformed(message: "The body is not valid JSON: \(error.description).")
        case .success(.notAnObject):
            throw Malformed(message: "The body must be a JSON object: one event, or {\"events\": [...]}.")
        case .success(.single(let members)):
            return EventsRequest(candidates: [WellFormedRule.check(members, now: now)], isBatch: false)
        case .success(.batch(let candidates, let count)):
            guard (1...maximumBatchCount).contains(count) else {
                throw Malformed(message: "events has \(count) entries; it must have 1 to \(maximumBatchCount).")
            }
            return EventsRequest(candidates: candidates, isBatch: true)
        case .success(.eventsNotAnArray):
            throw Malformed(message: "events must be an array of 1 to \(maximumBatchCount) events.")
        }
    }

    /// What the body costs in the events bucket (API.md section 6), without decoding its events:
    /// the number of candidates `decode(body:now:)` gives (a batch's entries, or 1 for a single
    /// event), or 1 when it throws (a body that is not a batch, or not readable, costs 1). The body
    /// is checked by the same tokenizer, so the two never disagree; a refused batch then costs a
    /// scan, not a decode.
    public static func cost(ofBody body: [UInt8]) -> Int {
        guard case .array(let count)? = try? JSONParser.scanMember("events", in: body),
              (1...maximumBatchCount).contains(count) else { return 1 }
        return count
    }
}

/// What an events body holds, as one pass of the tokenizer reads it.
enum BodyShape {
    case notAnObject
    /// A top-level object without `events`: its members, as one event.
    case single(EventMembers)
    /// `events` is an array: the candidates of its first `maximumBatchCount` entries, and how many
    /// entries it has.
    case batch([EventCandidate], count: Int)
    case eventsNotAnArray
}

/// One pass over an events body.
struct EventsBodyReader {
    var tokenizer: JSONTokenizer
    let now: Timestamp

    mutating func body() throws(JSONParseError) -> BodyShape {
        let first = try tokenizer.next()
        guard first == .beginObject else {
            // The rest is still read: a body that is not JSON at all says so, not "not an object".
            try tokenizer.skipRest(of: first)
            _ = try tokenizer.next()
            return .notAnObject
        }
        var members = EventMembers()
        var events: BodyShape?
        while case .key(let name) = try tokenizer.next() {
            if let slot = EventMembers.slot(of: name, in: tokenizer) {
                members.set(slot, try JSONParser.value(&tokenizer))
            } else if tokenizer.equals(name, "events") {
                events = try entries()
            } else {
                try tokenizer.skipValue()
            }
        }
        // The object ended: only whitespace may follow.
        _ = try tokenizer.next()
        return events ?? .single(members)
    }

    /// The value of `events`: an array's entries as candidates (the first `maximumBatchCount` of
    /// them; the rest only counted), or `.eventsNotAnArray`.
    mutating func entries() throws(JSONParseError) -> BodyShape {
        let first = try tokenizer.next()
        guard first == .beginArray else {
            try tokenizer.skipRest(of: first)
            return .eventsNotAnArray
        }
        var candidates: [EventCandidate] = []
        candidates.reserveCapacity(64)
        var count = 0
        while true {
            let token = try tokenizer.next()
            if token == .endArray { break }
            count += 1
            guard count <= EventsRequest.maximumBatchCount else {
                try tokenizer.skipRest(of: token)
                continue
            }
            guard token == .beginObject else {
                try tokenizer.skipRest(of: token)
                candidates.append(.invalid(echoID: nil, field: nil, message: WellFormedRule.Message.notAnObject, typeForMetrics: nil))
                continue
            }
            candidates.append(WellFormedRule.check(try eventObject(), now: now))
        }
        return .batch(candidates, count: count)
    }

    /// The members of an event object whose `{` was just read.
    mutating func eventObject() throws(JSONParseError) -> EventMembers {
        var members = EventMembers()
        while case .key(let name) = try tokenizer.next() {
            if let slot = EventMembers.slot(of: name, in: tokenizer) {
                members.set(slot, try JSONParser.value(&tokenizer))
            } else {
                try tokenizer.skipValue()
            }
        }
        return members
    }
}

extension EventMembers {
    /// A member rule 1 reads.
    enum Slot {
        case eventID, type, sessionID, adID, occurredAt, snapshotID, position, visibleFraction, visibleMilliseconds
    }

    /// The member a key names, nil for one rule 1 does not read: by length, then bytes.
    static func slot(of name: JSONText, in tokenizer: JSONTokenizer) -> Slot? {
        guard !name.hasEscapes else { return slot(named: tokenizer.string(name)) }
        switch name.end - name.start {
        case 4: return tokenizer.equals(name, "type") ? .type : nil
        case 5: return tokenizer.equals(name, "ad_id") ? .adID : nil
        case 8:
            if tokenizer.equals(name, "event_id") { return .eventID }
            return tokenizer.equals(name, "position") ? .position : nil
        case 10:
            if tokenizer.equals(name, "session_id") { return .sessionID }
            return tokenizer.equals(name, "visible_ms") ? .visibleMilliseconds : nil
        case 11:
            if tokenizer.equals(name, "occurred_at") { return .occurredAt }
            return tokenizer.equals(name, "snapshot_id") ? .snapshotID : nil
        case 16: return tokenizer.equals(name, "visible_fraction") ? .visibleFraction : nil
        default: return nil
        }
    }

    /// The member a decoded key names (a key written with escapes).
    static func slot(named name: String) -> Slot? {
        switch name {
        case "event_id": .eventID
        case "type": .type
        case "session_id": .sessionID
        case "ad_id": .adID
        case "occurred_at": .occurredAt
        case "snapshot_id": .snapshotID
        case "position": .position
        case "visible_fraction": .visibleFraction
        case "visible_ms": .visibleMilliseconds
        default: nil
        }
    }

    mutating func set(_ slot: Slot, _ value: JSONValue) {
        switch slot {
        case .eventID: eventID = value
        case .type: type = value
        case .sessionID: sessionID = value
        case .adID: adID = value
        case .occurredAt: occurredAt = value
        case .snapshotID: snapshotID = value
        case .position: position = value
        case .visibleFraction: visibleFraction = value
        case .visibleMilliseconds: visibleMilliseconds = value
        }
    }
}
