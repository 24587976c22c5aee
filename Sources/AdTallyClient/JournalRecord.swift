import Foundation

/// One entry of the journal. The journal is a log of facts, replayed in order at start: an event was
/// tracked, a batch was cut from some events (and with which clock correction, so that it encodes to
/// the same bytes when resent), a batch was closed (answered or refused), events were dropped.
enum JournalRecord: Sendable, Equatable {
    /// The first record of every file: the format, so that a future format is never misread.
    case header(version: UInt8)
    case event(sequence: UInt64, TrackedEvent)
    /// A batch now holds these events; a later batch record that names an event takes it over (a
    /// batch answered `413` is replaced by its two halves).
    case batch(id: UInt64, correction: Int64?, sequences: [UInt64])
    /// The batch left the queue: the server answered it, or refused it, or it was dropped.
    case batchClosed(id: UInt64)
    /// Events that left the queue without being in a closed batch (dropped when the queue was full).
    case dropped(sequences: [UInt64])

    static let currentVersion: UInt8 = 1

    private enum Kind: UInt8 {
        case header = 0, event = 1, batch = 2, batchClosed = 3, dropped = 4
    }

    /// The payload bytes, framed by `JournalFraming`.
    func encoded(into writer: inout ByteWriter) {
        switch self {
        case let .header(version):
            writer.byte(Kind.header.rawValue)
            writer.byte(version)
        case let .event(sequence, event):
            writer.byte(Kind.event.rawValue)
            writer.varint(sequence)
            writer.byte(event.type == .impression ? 0 : 1)
            withUnsafeBytes(of: event.eventID.uuid) { writer.raw($0) }
            writer.string(event.sessionID)
            writer.string(event.adID)
            var flags: UInt8 = 0
            if event.snapshotID != nil { flags |= 1 }
            if event.position != nil { flags |= 2 }
            if event.visibility != nil { flags |= 4 }
            if event.correctionMilliseconds != nil { flags |= 8 }
            writer.byte(flags)
            if let snapshot = event.snapshotID { writer.string(snapshot) }
            if let position = event.position { writer.signed(Int64(position)) }
            if let visibility = event.visibility {
                writer.uint64(visibility.fraction.bitPattern)
                writer.signed(Int64(visibility.milliseconds))
            }
            writer.signed(event.deviceTimeMilliseconds)
            if let correction = event.correctionMilliseconds { writer.signed(correction) }
        case let .batch(id, correction, sequences):
            writer.byte(Kind.batch.rawValue)
            writer.varint(id)
            writer.byte(correction == nil ? 0 : 1)
            if let correction { writer.signed(correction) }
            writeSequences(sequences, into: &writer)
        case let .batchClosed(id):
            writer.byte(Kind.batchClosed.rawValue)
            writer.varint(id)
        case let .dropped(sequences):
            writer.byte(Kind.dropped.rawValue)
            writeSequences(sequences, into: &writer)
        }
    }

    /// Sequences ascending as a count and deltas, a byte or two each.
    private func writeSequences(_ sequences: [UInt64], into writer: inout ByteWriter) {
        writer.varint(UInt64(sequences.count))
        var previous: UInt64 = 0
        for sequence in sequences {
            writer.signed(Int64(bitPattern: sequence &- previous))
            previous = sequence
        }
    }

    private static func readSequences(_ reader: inout ByteReader) throws(ByteReader.Malformed) -> [UInt64] {
        let count = try reader.count(limit: 1_000_000)
        var sequences: [UInt64] = []
        sequences.reserveCapacity(count)
        var previous: UInt64 = 0
        for _ in 0..<count {
            previous = previous &+ UInt64(bitPattern: try reader.signed())
            sequences.append(previous)
        }
        return sequences
    }

    /// Decodes one payload; throws on anything short, trailing or out of range.
    static func decode(_ payload: ArraySlice<UInt8>) throws(ByteReader.Malformed) -> JournalRecord {
        var reader = ByteReader(payload)
        guard let kind = Kind(rawValue: try reader.byte()) else { throw ByteReader.Malformed() }
        let record: JournalRecord
        switch kind {
        case .header:
            record = .header(version: try reader.byte())
        case .event:
            let sequence = try reader.varint()
            let typeByte = try reader.byte()
            guard typeByte <= 1 else { throw ByteReader.Malformed() }
            let idBytes = Array(try reader.raw(16))
            let uuid = UUID(uuid: (idBytes[0], idBytes[1], idBytes[2], idBytes[3], idBytes[4], idBytes[5],
                                   idBytes[6], idBytes[7], idBytes[8], idBytes[9], idBytes[10], idBytes[11],
                                   idBytes[12], idBytes[13], idBytes[14], idBytes[15]))
            let session = try reader.string()
            let ad = try reader.string()
            let flags = try reader.byte()
            let snapshot = flags & 1 != 0 ? try reader.string() : nil
            var position: Int?
            if flags & 2 != 0 {
                let value = try reader.signed()
                guard (0...Int64(Int32.max)).contains(value) else { throw ByteReader.Malformed() }
                position = Int(value)
            }
            var visibility: Visibility?
            if flags & 4 != 0 {
                let fraction = Double(bitPattern: try reader.uint64())
                let milliseconds = try reader.signed()
                guard (0...86_400_000).contains(milliseconds) else { throw ByteReader.Malformed() }
                visibility = Visibility(fraction: fraction, milliseconds: Int(milliseconds))
            }
            let deviceTime = try reader.signed()
            let correction = flags & 8 != 0 ? try reader.signed() : nil
            let event = TrackedEvent(eventID: uuid, type: typeByte == 0 ? .impression : .click, sessionID: session,
                                     adID: ad, snapshotID: snapshot, position: position, visibility: visibility,
                                     deviceTimeMilliseconds: deviceTime, correctionMilliseconds: correction)
            record = .event(sequence: sequence, event)
        case .batch:
            let id = try reader.varint()
            let hasCorrection = try reader.byte()
            let correction = hasCorrection == 1 ? try reader.signed() : nil
            record = .batch(id: id, correction: correction, sequences: try readSequences(&reader))
        case .batchClosed:
            record = .batchClosed(id: try reader.varint())
        case .dropped:
            record = .dropped(sequences: try readSequences(&reader))
        }
        guard reader.isAtEnd else { throw ByteReader.Malformed() }
        return record
    }
}
