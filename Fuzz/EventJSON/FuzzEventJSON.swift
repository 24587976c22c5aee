// libFuzzer entry for the JSON tokenizer and the event / feed-snapshot body decoders (compiled with
// the request decoders and what they need by scripts/fuzz, over the JSON, Contract and Timestamps
// modules). Beyond "no crash", it checks:
//  - a parsed value written by JSONWriter parses back to an equal value, and writing it again gives
//    the same bytes; the scan (`scanMember`) fails exactly when the parse does and finds what the
//    parsed document holds under `events`;
//  - EventsRequest.decode, the one-pass reader, answers exactly what the contract read plainly
//    gives: the body parsed into a tree, then rule 1 over the tree (`reference`), malformed or not,
//    its message included; a batch yields one candidate per `events` entry, a single event one;
//  - FeedSnapshotInput(body:) is malformed_json exactly for non-JSON / non-object bodies and
//    otherwise invalid with a field; a decoded snapshot has at most maximumAdCount ads and distinct
//    ad ids and positions; decoding from bytes and from the parsed document agree.

import Contract
import JSON
import Timestamps

let now = Timestamp(microsecondsSinceEpoch: 1_795_960_200_000_000) // 2026-11-29T13:50:00Z, as the seeds

func written(_ value: JSONValue) -> [UInt8] {
    var writer = JSONWriter()
    writer.value(value)
    return writer.bytes
}

func checkJSON(_ bytes: [UInt8]) -> JSONValue? {
    let parsed: JSONValue?
    do { parsed = try JSONParser.parse(bytes) } catch { parsed = nil }
    let scan = try? JSONParser.scanMember("events", in: bytes)
    precondition((scan == nil) == (parsed == nil), "the scan and the parse disagree on whether the body is JSON")
    guard let value = parsed else { return nil }
    switch (value, scan) {
    case (.object(let members), .array(let count)?):
        guard case .array(let entries)? = members["events"] else { preconditionFailure("the scan found an array the parse did not") }
        precondition(entries.count == count, "the scan counted \(count) entries, the parse \(entries.count)")
    case (.object(let members), .absent?): precondition(members["events"] == nil, "the scan missed events")
    case (.object(let members), .notAnArray?):
        if case .array? = members["events"] { preconditionFailure("the scan missed an array") }
    case (.object, _): preconditionFailure("the scan called an object something else")
    default: precondition(scan == .notAnObject, "the scan called a non-object an object")
    }
    let bytes = written(value)
    let reparsed: JSONValue
    do { reparsed = try JSONParser.parse(bytes) } catch {
        preconditionFailure("JSONWriter output does not parse: \(error) in \(String(decoding: bytes, as: UTF8.self))")
    }
    precondition(reparsed == value, "write/parse round trip changed the value")
    precondition(written(reparsed) == bytes, "writing is not deterministic")
    return value
}

/// Section 2 read plainly: the whole body parsed, then an object with `events` a batch of 1 to 500
/// entries (each an object, or an invalid event), any other object one event.
func reference(_ bytes: [UInt8], _ document: JSONValue?) -> Result<EventsRequest, EventsRequest.Malformed> {
    guard let document else {
        let failure = Result { () throws(JSONParseError) in try JSONParser.parse(bytes) }
        guard case .failure(let error) = failure else { preconditionFailure("a body that parses has no document") }
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
    guard (1...EventsRequest.maximumBatchCount).contains(entries.count) else {
        return .failure(EventsRequest.Malformed(message: "events has \(entries.count) entries; it must have 1 to 500."))
    }
    return .success(EventsRequest(candidates: entries.map { entry in
        guard case .object(let event) = entry else {
            return .invalid(echoID: nil, field: nil, message: WellFormedRule.Message.notAnObject, typeForMetrics: nil)
        }
        return WellFormedRule.check(EventMembers(event), now: now)
    }, isBatch: true))
}

extension EventMembers {
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

func checkEvents(_ bytes: [UInt8], _ document: JSONValue?) {
    let decoded = Result { () throws(EventsRequest.Malformed) in try EventsRequest.decode(body: bytes, now: now) }
    precondition(decoded == reference(bytes, document), "the events reader and the plain reading disagree")
    if case .success(let request) = decoded {
        for candidate in request.candidates {
            _ = candidate.echoID
            _ = candidate.typeForMetrics
        }
    }
}

func checkSnapshot(_ bytes: [UInt8], _ document: JSONValue?) {
    let result = Result { () throws(FeedSnapshotInput.Refusal) in try FeedSnapshotInput(body: bytes) }
    var isObject = false
    if let document, case .object = document { isObject = true }
    switch result {
    case .failure(let refusal):
        switch refusal {
        case .malformedJSON: precondition(!isObject, "an object snapshot refused as malformed")
        case .invalid(let field, _): precondition(isObject && !field.isEmpty, "a non-object snapshot refused as invalid")
        }
        if let document {
            let again = Result { () throws(FeedSnapshotInput.Refusal) in try FeedSnapshotInput.validated(document) }
            guard case .failure(let second) = again, second == refusal else { preconditionFailure("init(body:) and validated(_:) disagree") }
        }
    case .success(let snapshot):
        precondition(isObject, "snapshot accepted from a non-object body")
        precondition(snapshot.ads.count <= FeedSnapshotInput.maximumAdCount, "too many ads accepted")
        precondition(Set(snapshot.ads.map(\.adID)).count == snapshot.ads.count, "repeated ad_id accepted")
        precondition(Set(snapshot.ads.map(\.position)).count == snapshot.ads.count, "repeated position accepted")
        let fingerprint = FeedSnapshotInput.contentFingerprint(of: snapshot.ads)
        precondition(fingerprint == FeedSnapshotInput.contentFingerprint(of: snapshot.ads), "fingerprint not deterministic")
        if let document {
            let again = Result { () throws(FeedSnapshotInput.Refusal) in try FeedSnapshotInput.validated(document) }
            precondition((try? again.get()) == snapshot, "init(body:) and validated(_:) disagree")
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let document = checkJSON(bytes)
    checkEvents(bytes, document)
    checkSnapshot(bytes, document)
    return 0
}
