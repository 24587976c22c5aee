/// Reads what `ByteWriter` wrote, failing (never trapping) on a short or malformed record: a
/// journal's bytes come from the disk, which a crash or a bad sector can leave in any state.
struct ByteReader {
    /// A record ended early or held an impossible value.
    struct Malformed: Error {}

    private let bytes: ArraySlice<UInt8>
    private var index: Int

    init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        index = bytes.startIndex
    }

    var isAtEnd: Bool { index == bytes.endIndex }

    mutating func byte() throws(Malformed) -> UInt8 {
        guard index < bytes.endIndex else { throw Malformed() }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func uint64() throws(Malformed) -> UInt64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 8) { value |= UInt64(try byte()) << UInt64(shift) }
        return value
    }

    mutating func varint() throws(Malformed) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let next = try byte()
            guard shift < 64 else { throw Malformed() }
            value |= UInt64(next & 0x7F) << shift
            if next & 0x80 == 0 { return value }
            shift += 7
        }
    }

    mutating func signed() throws(Malformed) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    mutating func count(limit: Int) throws(Malformed) -> Int {
        let value = try varint()
        guard value <= UInt64(limit) else { throw Malformed() }
        return Int(value)
    }

    mutating func raw(_ count: Int) throws(Malformed) -> ArraySlice<UInt8> {
        guard count >= 0, bytes.endIndex - index >= count else { throw Malformed() }
        defer { index += count }
        return bytes[index..<index + count]
    }

    mutating func string() throws(Malformed) -> String {
        let length = try count(limit: 4096)
        return String(decoding: try raw(length), as: UTF8.self)
    }
}
