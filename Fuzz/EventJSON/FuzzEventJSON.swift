// libFuzzer entry for the JSON parser and the event / feed-snapshot body decoders (compiled with
// the request decoders and what they need, as one module by scripts/fuzz). Beyond "no crash", it checks:
//  - JSONParser over [UInt8] and over a raw buffer agree; a parsed value written by JSONWriter
//    parses back to an equal value, and writing it again gives the same bytes;
//  - EventsRequest.decode throws only malformed_json (typed throws(InputError) rules out anything
//    else at compile time), exactly when the body is not JSON, not an object, or a bad `events`;
//    a batch yields one candidate per `events` entry, a single event one candidate;
//  - EventsFastDecoder, whenever it takes a body, answers exactly as the general parser's path;
//  - FeedSnapshotInput.decode throws malformed_json exactly for non-JSON / non-object bodies and
//    otherwise invalid_snapshot with a field; a decoded snapshot has at most maximumAdCount ads and
//    distinct ad ids and positions; decoding from bytes and from the parsed document agree.

let now = Timestamp(microsecondsSinceEpoch: 1_795_960_200_000_000) // 2026-11-29T13:50:00Z, as the seeds

func checkJSON(_ bytes: [UInt8]) -> JSONValue? {
    let fromArray: JSONValue?
    do { fromArray = try JSONParser.parse(bytes) } catch { fromArray = nil }
    let fromBuffer: JSONValue? = bytes.withUnsafeBytes { raw in
        do { return try JSONParser.parse(raw) } catch { return nil }
    }
    precondition(fromArray == fromBuffer, "array and buffer parses disagree")
    guard let value = fromArray else { return nil }
    let written = JSONWriter.serialize(value)
    let reparsed: JSONValue
    do { reparsed = try JSONParser.parse(written) } catch {
        preconditionFailure("JSONWriter output does not parse: \(error) in \(String(decoding: written, as: UTF8.self))")
    }
    precondition(reparsed == value, "write/parse round trip changed the value")
    precondition(JSONWriter.serialize(reparsed) == written, "writing is not deterministic")
    return value
}

func checkEvents(_ bytes: [UInt8], _ document: JSONValue?) {
    if let direct = bytes.withUnsafeBufferPointer({ EventsFastDecoder.decode($0, now: now) }) {
        let parsed = Result { () throws(InputError) in try EventsRequest.decodeParsing(body: bytes, now: now) }
        precondition((try? parsed.get()) == direct, "the fast decoder and the parser disagree")
    }
    let result: Result<EventsRequest, InputError> = Result { () throws(InputError) in try EventsRequest.decode(body: bytes, now: now) }
    switch result {
    case .failure(let e):
        precondition(e.code == .malformedJSON, "events decode threw \(e)")
        if let document, case .object(let members) = document {
            // An object body is refused only for a bad `events` member.
            guard let events = members["events"] else { preconditionFailure("single event object refused: \(e)") }
            if case .array(let entries) = events {
                precondition(!(1...EventsRequest.maximumBatchCount).contains(entries.count), "good batch refused: \(e)")
            }
        }
    case .success(let request):
        guard let document, case .object(let members) = document else {
            preconditionFailure("events decode accepted a body that is not a JSON object")
        }
        if let events = members["events"] {
            guard case .array(let entries) = events else { preconditionFailure("events not an array, accepted") }
            precondition(request.isBatch, "batch not marked isBatch")
            precondition(request.candidates.count == entries.count,
                         "\(request.candidates.count) candidates for \(entries.count) events")
        } else {
            precondition(!request.isBatch && request.candidates.count == 1, "single event gave \(request.candidates.count) candidates")
        }
        for c in request.candidates {
            _ = c.echoID
            _ = c.typeForMetrics
        }
        let again = Result { () throws(InputError) in try EventsRequest.decode(document, now: now) }
        precondition((try? again.get()) == request, "decode(body:) and decode(document) disagree")
    }
}

func checkSnapshot(_ bytes: [UInt8], _ document: JSONValue?) {
    let result: Result<FeedSnapshotInput, InputError> = Result { () throws(InputError) in try FeedSnapshotInput.decode(body: bytes) }
    var isObject = false
    if let document, case .object = document { isObject = true }
    switch result {
    case .failure(let e):
        if isObject {
            precondition(e.code == .invalidSnapshot && e.field != nil, "object snapshot refused as \(e)")
        } else {
            precondition(e.code == .malformedJSON, "non-object snapshot refused as \(e)")
        }
        if let document {
            let again = Result { () throws(InputError) in try FeedSnapshotInput.decode(document) }
            guard case .failure(let e2) = again, e2 == e else { preconditionFailure("decode(body:) and decode(document) disagree") }
        }
    case .success(let snapshot):
        precondition(isObject, "snapshot accepted from a non-object body")
        precondition(snapshot.ads.count <= FeedSnapshotInput.maximumAdCount, "too many ads accepted")
        precondition(Set(snapshot.ads.map(\.adID)).count == snapshot.ads.count, "repeated ad_id accepted")
        precondition(Set(snapshot.ads.map(\.position)).count == snapshot.ads.count, "repeated position accepted")
        let fingerprint = FeedSnapshotInput.contentFingerprint(of: snapshot.ads)
        precondition(fingerprint == FeedSnapshotInput.contentFingerprint(of: snapshot.ads), "fingerprint not deterministic")
        let again = Result { () throws(InputError) in try FeedSnapshotInput.decode(document!) }
        precondition((try? again.get()) == snapshot, "decode(body:) and decode(document) disagree")
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
