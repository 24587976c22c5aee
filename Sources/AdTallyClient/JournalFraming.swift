/// How records sit in a journal file: a marker byte, the payload's length and CRC-32 (both
/// little-endian 32-bit), then the payload. A crash mid-append leaves a torn last frame, and a
/// damaged sector garbles some bytes; reading skips forward byte by byte to the next frame whose
/// length and checksum hold, so a bad stretch costs the records in it and no others.
enum JournalFraming {
    static let marker: UInt8 = 0xA7
    static let headerSize = 9
    /// Far above any real record; a larger length is garbage.
    static let maximumPayload = 8 << 20

    /// Appends one framed record: the payload is written in place after a header that is filled in
    /// afterwards, so that a record costs no buffer of its own.
    static func append(_ record: JournalRecord, to bytes: inout [UInt8]) {
        let start = bytes.count
        var writer = ByteWriter()
        swap(&writer.bytes, &bytes)
        writer.raw(repeatElement(0, count: headerSize))
        record.encoded(into: &writer)
        swap(&writer.bytes, &bytes)
        let payloadStart = start + headerSize
        let length = UInt32(bytes.count - payloadStart)
        let checksum = CRC32.checksum(bytes[payloadStart...])
        bytes[start] = marker
        for shift in 0..<4 {
            bytes[start + 1 + shift] = UInt8(truncatingIfNeeded: length >> UInt32(8 * shift))
            bytes[start + 5 + shift] = UInt8(truncatingIfNeeded: checksum >> UInt32(8 * shift))
        }
    }

    /// What reading a file found.
    struct Scan {
        var records: [JournalRecord] = []
        /// Bytes that belonged to no valid frame (torn or damaged).
        var skippedBytes = 0
    }

    /// Every valid frame of `bytes`, in order.
    static func scan(_ bytes: [UInt8]) -> Scan {
        var scan = Scan()
        var index = 0
        while index < bytes.count {
            if let (record, length) = frame(at: index, in: bytes) {
                scan.records.append(record)
                index += length
            } else {
                scan.skippedBytes += 1
                index += 1
            }
        }
        return scan
    }

    private static func frame(at index: Int, in bytes: [UInt8]) -> (JournalRecord, Int)? {
        guard bytes[index] == marker, bytes.count - index >= headerSize else { return nil }
        let length = Int(uint32(bytes, at: index + 1))
        guard length <= maximumPayload, bytes.count - index - headerSize >= length else { return nil }
        let payload = bytes[(index + headerSize)..<(index + headerSize + length)]
        guard CRC32.checksum(payload) == uint32(bytes, at: index + 5),
              let record = try? JournalRecord.decode(payload) else { return nil }
        return (record, headerSize + length)
    }

    private static func uint32(_ bytes: [UInt8], at index: Int) -> UInt32 {
        UInt32(bytes[index]) | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2]) << 16 | UInt32(bytes[index + 3]) << 24
    }
}
