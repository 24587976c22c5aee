/// A one-dimensional array parameter in PostgreSQL's binary format. Set-based SQL over a batch
/// (`unnest($1::uuid[], $2::timestamptz[], ...)`) sends a dozen arrays per statement; in text form
/// the server parses every element (`array_in`, then `uuid_in`, `timestamptz_in`, ...), about a
/// quarter of a microsecond each, which was a fifth of its work per stored event
/// (scripts/bench-ingest). In binary form `array_recv` copies each element. The element type must
/// be the one the SQL casts the parameter to (`$1::uuid[]` takes `uuid`); PostgreSQL refuses any
/// other with "wrong element type".
public struct PostgresBinaryArray: PostgresBindable, Equatable {
    /// The element types this encoder writes, by their PostgreSQL OIDs.
    public enum ElementType: UInt32, Sendable {
        case bool = 16
        case int8 = 20
        case int4 = 23
        case text = 25
        case float8 = 701
        case timestamptz = 1184
        case uuid = 2950
    }

    /// The whole value: header, then each element's length and bytes (`array_send`'s layout).
    public let bytes: [UInt8]

    public var postgresParameter: PostgresParameter { .binary(bytes) }

    /// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01T00:00:00Z), the origin of the
    /// binary `timestamptz`.
    static let postgresEpochOffsetMicroseconds: Int64 = 946_684_800_000_000

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Encodes `count` elements (`element(i)`, nil for NULL) into one exactly sized buffer: a first
    /// pass adds up the sizes (`size`), the second writes each element's length and then its bytes
    /// (`write`, which must write exactly `size` bytes, or return false to give up). A batch sends
    /// thousands of elements per statement, so this writes through a pointer instead of growing an
    /// array element by element (which was about 2% of the machine under scripts/bench-ingest).
    /// Nil when `write` gave up.
    private static func encode<Element>(_ type: ElementType, count: Int, _ element: (Int) -> Element?, size: (Element) -> Int,
                                        write: (Element, UnsafeMutableRawPointer) -> Bool) -> [UInt8]? {
        var total = count == 0 ? 12 : 20
        var hasNull = false
        for index in 0..<count {
            if let value = element(index) { total += 4 + size(value) } else { total += 4; hasNull = true }
        }
        var complete = true
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            initialized = 0
            // The capacity is at least 12 bytes, so the buffer has an address.
            guard let base = buffer.baseAddress.map(UnsafeMutableRawPointer.init) else { complete = false; return }
            var offset = 0
            func put(_ value: Int32) {
                base.storeBytes(of: UInt32(bitPattern: value).bigEndian, toByteOffset: offset, as: UInt32.self)
                offset += 4
            }
            if count == 0 {
                // ndim 0 is the empty array: no dimension follows.
                put(0); put(0); put(Int32(bitPattern: type.rawValue))
            } else {
                put(1)                                  // dimensions
                put(hasNull ? 1 : 0)                    // has nulls
                put(Int32(bitPattern: type.rawValue))   // element type
                put(Int32(truncatingIfNeeded: count))   // length of the dimension
                put(1)                                  // lower bound
            }
            for index in 0..<count {
                guard let value = element(index) else { put(-1); continue }
                let length = size(value)
                put(Int32(truncatingIfNeeded: length))
                guard write(value, base + offset) else { complete = false; return }
                offset += length
            }
            initialized = offset
        }
        return complete ? bytes : nil
    }

    /// Encodes elements that always encode (every type but `uuid`).
    private init<Element>(_ type: ElementType, count: Int, _ element: (Int) -> Element?, size: (Element) -> Int,
                          write: (Element, UnsafeMutableRawPointer) -> Void) {
        // `write` cannot give up, so `encode` always returns bytes.
        self.init(bytes: Self.encode(type, count: count, element, size: size, write: { write($0, $1); return true }) ?? [])
    }

    /// Writes `value` big-endian at `pointer`; alignment does not matter to `storeBytes`.
    private static func store<Integer: FixedWidthInteger>(_ value: Integer, at pointer: UnsafeMutableRawPointer) {
        pointer.storeBytes(of: value.bigEndian, as: Integer.self)
    }

    /// The UTF-8 bytes of `value`, written at `pointer` (`value.utf8.count` of them).
    private static func storeUTF8(_ value: String, at pointer: UnsafeMutableRawPointer) {
        var value = value
        value.withUTF8 { utf8 in
            guard let source = utf8.baseAddress else { return }  // empty: nothing to write
            pointer.copyMemory(from: source, byteCount: utf8.count)
        }
    }

    /// `text[]` (also right for `varchar` casts' input, which take text). Values are sent as their
    /// UTF-8 bytes; the server checks them against its encoding, so a NUL is refused, not cut off.
    public static func text(_ values: [String?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.text, count: values.count, { values[$0] }, size: { $0.utf8.count }, write: storeUTF8)
    }

    /// `text[]` without NULLs.
    public static func text(_ values: [String]) -> PostgresBinaryArray {
        PostgresBinaryArray(.text, count: values.count, { values[$0] }, size: { $0.utf8.count }, write: storeUTF8)
    }

    /// `int4[]`.
    public static func int4(_ values: [Int32?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.int4, count: values.count, { values[$0] }, size: { _ in 4 }, write: store)
    }

    /// `int8[]`.
    public static func int8(_ values: [Int64?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.int8, count: values.count, { values[$0] }, size: { _ in 8 }, write: store)
    }

    /// `float8[]`, bit for bit (NaN and infinities included).
    public static func float8(_ values: [Double?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.float8, count: values.count, { values[$0] }, size: { _ in 8 }) { store($0.bitPattern, at: $1) }
    }

    /// `bool[]`.
    public static func bool(_ values: [Bool?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.bool, count: values.count, { values[$0] }, size: { _ in 1 }) { store(UInt8($0 ? 1 : 0), at: $1) }
    }

    /// `timestamptz[]` from microseconds since the Unix epoch (UTC).
    public static func timestamptz(microsecondsSinceUnixEpoch values: [Int64?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.timestamptz, count: values.count, { values[$0] }, size: { _ in 8 }) {
            store($0 &- postgresEpochOffsetMicroseconds, at: $1)
        }
    }

    /// `uuid[]` from UUID text (hex digits in any case, with or without the four hyphens, as
    /// `uuid_in` would read them after validation elsewhere); `nil` is `NULL`. Nil when some value
    /// is not a UUID: the caller then sends text (`PostgresArray`) and lets the server say what is wrong.
    public static func uuid(_ values: [String?]) -> PostgresBinaryArray? {
        encode(.uuid, count: values.count, { values[$0] }, size: { _ in 16 }) { value, pointer in
            // withUTF8 reads a native string's bytes in place (a batch encodes thousands of ids).
            var value = value
            return value.withUTF8 { storeUUID(utf8: $0, at: pointer.assumingMemoryBound(to: UInt8.self)) }
        }.map(PostgresBinaryArray.init(bytes:))
    }

    /// Writes the 16 bytes of a UUID written as 32 hex digits, optionally with hyphens between
    /// groups; false (and possibly a partial write, which the caller discards) when it is not one.
    private static func storeUUID(utf8: UnsafeBufferPointer<UInt8>, at pointer: UnsafeMutablePointer<UInt8>) -> Bool {
        var high: UInt8? = nil
        var written = 0
        for character in utf8 {
            if character == UInt8(ascii: "-") { continue }
            let nibble: UInt8
            switch character {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character - UInt8(ascii: "A") + 10
            default: return false
            }
            if let first = high {
                guard written < 16 else { return false }
                pointer[written] = first << 4 | nibble
                written += 1
                high = nil
            } else {
                high = nibble
            }
        }
        return written == 16 && high == nil
    }
}
