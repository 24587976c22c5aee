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

    // The keys with their punctuation, written once: each closes the previous string value (where
    // there is one) and opens its own.
    private static let eventIDKey = Array(#"{"event_id":""#.utf8)
    private static let typeKey = Array(#"","type":""#.utf8)
    private static let sessionKey = Array(#"","session_id":""#.utf8)
    private static let adKey = Array(#"","ad_id":""#.utf8)
    private static let occurredKey = Array(#"","occurred_at":""#.utf8)
    private static let snapshotKey = Array(#"","snapshot_id":""#.utf8)
    private static let positionKey = Array(#","position":"#.utf8)
    private static let fractionKey = Array(#","visible_fraction":"#.utf8)
    private static let millisecondsKey = Array(#","visible_ms":"#.utf8)

    static func append(_ event: TrackedEvent, correction: Int64?, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: eventIDKey)
        appendLowercaseUUID(event.eventID, to: &bytes)
        bytes.append(contentsOf: typeKey)
        bytes.append(contentsOf: event.type.rawValue.utf8)
        bytes.append(contentsOf: sessionKey)
        bytes.append(contentsOf: event.sessionID.utf8)
        bytes.append(contentsOf: adKey)
        bytes.append(contentsOf: event.adID.utf8)
        bytes.append(contentsOf: occurredKey)
        CivilTime.appendTimestamp(milliseconds: event.occurredAtMilliseconds(batchCorrection: correction), to: &bytes)
        if let snapshot = event.snapshotID {
            bytes.append(contentsOf: snapshotKey)
            bytes.append(contentsOf: snapshot.utf8)
        }
        bytes.append(UInt8(ascii: "\""))
        if let position = event.position {
            bytes.append(contentsOf: positionKey)
            appendInteger(position, to: &bytes)
        }
        if event.type == .impression, let visibility = event.visibility {
            bytes.append(contentsOf: fractionKey)
            appendFraction(visibility.fraction, to: &bytes)
            bytes.append(contentsOf: millisecondsKey)
            appendInteger(visibility.milliseconds, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// A non-negative integer in decimal, without a `String` in between.
    private static func appendInteger(_ value: Int, to bytes: inout [UInt8]) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var rest = value.magnitude
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = 0x30 + UInt8(rest % 10)
                rest /= 10
                count += 1
            } while rest > 0
            bytes.append(contentsOf: buffer[(20 - count)...])
        }
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
