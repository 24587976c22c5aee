import Foundation

/// Entry points for `scripts/bench-client` into steps that have no public API of their own
/// (encoding a batch, reading an answer, framing journal records), so that their cost per event can
/// be measured alone. `@_spi(Benchmark)`: not part of the library's API.
@_spi(Benchmark)
public enum ClientBenchmarks {
    static func sampleEvents(_ count: Int, session: String) -> [TrackedEvent] {
        let now = AdTallyTracker.milliseconds(Date())
        return (0..<count).map { index in
            TrackedEvent(eventID: AdTallyTracker.randomUUID(), type: .impression, sessionID: session, adID: "ad-\(index)",
                         snapshotID: "\(session)-feed", position: index, visibility: nil,
                         deviceTimeMilliseconds: now, correctionMilliseconds: 0)
        }
    }

    /// `POST /v1/events` bodies of `batches` batches of `size` impressions each, as the tracker
    /// encodes them: batch `i` is for session `"\(prefix)-\(i)"`, ads `ad-0` to `ad-(size-1)` at
    /// rows 0 to `size - 1`, snapshot `"\(prefix)-\(i)-feed"`.
    public static func bodies(batches: Int, size: Int, sessionPrefix prefix: String) -> [Data] {
        (0..<batches).map { batch in EventEncoder.batchBody(sampleEvents(size, session: "\(prefix)-\(batch)"), correction: nil) }
    }

    /// Encodes one batch of `size` events `repeats` times; returns the bytes written.
    public static func encode(size: Int, repeats: Int) -> Int {
        let events = sampleEvents(size, session: "bench-session")
        var bytes = 0
        for _ in 0..<repeats { bytes += EventEncoder.batchBody(events, correction: 0).count }
        return bytes
    }

    /// Reads a server's answer to a batch of `size` events and matches it to them, `repeats` times;
    /// returns the outcomes read.
    public static func decodeAnswer(size: Int, repeats: Int) -> Int {
        let events = sampleEvents(size, session: "bench-session")
        let results = events.map { event in #"{"event_id":"\#(EventEncoder.lowercaseUUID(event.eventID))","status":"accepted"}"# }
        let body = Data(#"{"accepted":\#(size),"duplicate":0,"rejected":0,"results":[\#(results.joined(separator: ","))]}"#.utf8)
        var outcomes = 0
        for _ in 0..<repeats { outcomes += BatchAnswer.outcomes(of: body, for: events)?.count ?? 0 }
        return outcomes
    }

    /// Frames `size` event records as the journal writes them, `repeats` times; returns the bytes.
    public static func frameRecords(size: Int, repeats: Int) -> Int {
        let records = sampleEvents(size, session: "bench-session").enumerated().map {
            JournalRecord.event(sequence: UInt64($0.offset + 1), $0.element)
        }
        var total = 0
        for _ in 0..<repeats {
            var bytes: [UInt8] = []
            for record in records { JournalFraming.append(record, to: &bytes) }
            total += bytes.count
        }
        return total
    }
}
