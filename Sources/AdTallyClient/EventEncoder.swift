import Foundation

/// The JSON of `POST /v1/events`, written byte by byte. The encoding is a pure function of the
/// events and the batch's clock correction, so that a retried batch, or one resent after a restart
/// from the journal, carries exactly the bytes of its first attempt. Identifiers were checked at the
/// call to be of the contract's form, which needs no escaping.
enum EventEncoder {
    /// `{"events":[...]}` for one batch.
    static func batchBody(_ events: [TrackedEvent], correction: Int64?) -> Data {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(events.count * 260 + 16)
        bytes.append(contentsOf: Array(#"{"events":["#.utf8))
        for (index, event) in events.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            append(event, correction: correction, to: &bytes)
        }
        bytes.append(contentsOf: Array("]}".utf8))
        return Data(bytes)
    }

    /// Bytes the body adds around its events, and per event beyond the event itself (a comma).
    static let bodyOverhead = 13

    /// An upper bound of the bytes `event` takes in a body, cheap enough to compute while cutting a
    /// batch under the tracker's lock: the fixed keys and punctuation, the widest numbers, and the
    /// identifiers' own lengths.
    static func maximumSize(of event: TrackedEvent) -> Int {
        230 + event.sessionID.utf8.count + event.adID.utf8.count + (event.snapshotID?.utf8.count ?? 0)
    }

    static func append(_ event: TrackedEvent, correction: Int64?, to bytes: inout [UInt8]) {
        key("event_id", first: true, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        appendLowercaseUUID(event.eventID, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        key("type", to: &bytes)
        string(event.type.rawValue, to: &bytes)
        key("session_id", to: &bytes)
        string(event.sessionID, to: &bytes)
        key("ad_id", to: &bytes)
        string(event.adID, to: &bytes)
        key("occurred_at", to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        CivilTime.appendTimestamp(milliseconds: event.occurredAtMilliseconds(batchCorrection: correction), to: &bytes)
        bytes.append(UInt8(ascii: "\""))
        if let snapshot = event.snapshotID {
            key("snapshot_id", to: &bytes)
            string(snapshot, to: &bytes)
        }
        if let position = event.position {
            key("position", to: &bytes)
            bytes.append(contentsOf: Array(String(position).utf8))
        }
        if event.type == .impression, let visibility = event.visibility {
            key("visible_fraction", to: &bytes)
            appendFraction(visibility.fraction, to: &bytes)
            key("visible_ms", to: &bytes)
            bytes.append(contentsOf: Array(String(visibility.milliseconds).utf8))
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private static func key(_ name: String, first: Bool = false, to bytes: inout [UInt8]) {
        bytes.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
        string(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    private static func string(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: text.utf8)
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The canonical 8-4-4-4-12 form in lower case, as the server stores and echoes it.
    static func appendLowercaseUUID(_ id: UUID, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: id.uuid) { raw in
            for (index, byte) in raw.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
                bytes.append(hexDigits[Int(byte >> 4)])
                bytes.append(hexDigits[Int(byte & 0x0F)])
            }
        }
    }

    /// The lowercase text of `id`, for matching the server's answers.
    static func lowercaseUUID(_ id: UUID) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(36)
        appendLowercaseUUID(id, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A fraction in 0...1 rounded down to four decimals: `0`, `1`, `0.5`, `0.6234`.
    private static func appendFraction(_ fraction: Double, to bytes: inout [UInt8]) {
        let tenThousandths = Int((min(max(fraction, 0), 1) * 10_000).rounded(.down))
        if tenThousandths >= 10_000 { bytes.append(UInt8(ascii: "1")); return }
        bytes.append(UInt8(ascii: "0"))
        guard tenThousandths > 0 else { return }
        bytes.append(UInt8(ascii: "."))
        var digits = Array(String(tenThousandths).utf8)
        while digits.count < 4 { digits.insert(UInt8(ascii: "0"), at: 0) }
        while digits.last == UInt8(ascii: "0") { digits.removeLast() }
        bytes.append(contentsOf: digits)
    }
}
