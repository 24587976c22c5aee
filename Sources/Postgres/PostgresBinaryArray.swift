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

    private init<Element>(_ type: ElementType, _ elements: [Element?], byteEstimate: Int, write: (Element, inout [UInt8]) -> Void) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + elements.count * 4 + byteEstimate)
        let hasNull = elements.contains { $0 == nil }
        if elements.isEmpty {
            // ndim 0 is the empty array: no dimension follows.
            Self.append(Int32(0), to: &bytes)
            Self.append(Int32(0), to: &bytes)
            Self.append(type.rawValue, to: &bytes)
        } else {
            Self.append(Int32(1), to: &bytes)                       // dimensions
            Self.append(Int32(hasNull ? 1 : 0), to: &bytes)         // has nulls
            Self.append(type.rawValue, to: &bytes)                  // element type
            Self.append(Int32(truncatingIfNeeded: elements.count), to: &bytes)  // length of the dimension
            Self.append(Int32(1), to: &bytes)                       // lower bound
        }
        for element in elements {
            guard let element else {
                Self.append(Int32(-1), to: &bytes)
                continue
            }
            let lengthAt = bytes.count
            Self.append(Int32(0), to: &bytes)
            write(element, &bytes)
            let length = UInt32(truncatingIfNeeded: bytes.count - lengthAt - 4)
            bytes[lengthAt] = UInt8(truncatingIfNeeded: length >> 24)
            bytes[lengthAt + 1] = UInt8(truncatingIfNeeded: length >> 16)
            bytes[lengthAt + 2] = UInt8(truncatingIfNeeded: length >> 8)
            bytes[lengthAt + 3] = UInt8(truncatingIfNeeded: length)
        }
        self.bytes = bytes
    }

    /// `text[]` (also right for `varchar` casts' input, which take text). Values are sent as their
    /// UTF-8 bytes; the server checks them against its encoding, so a NUL is refused, not cut off.
    public static func text(_ values: [String?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.text, values, byteEstimate: values.count * 16) { value, bytes in
            bytes.append(contentsOf: value.utf8)
        }
    }

    /// `text[]` without NULLs.
    public static func text(_ values: [String]) -> PostgresBinaryArray {
        text(values.map(Optional.some))
    }

    /// `int4[]`.
    public static func int4(_ values: [Int32?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.int4, values, byteEstimate: values.count * 4) { value, bytes in append(value, to: &bytes) }
    }

    /// `int8[]`.
    public static func int8(_ values: [Int64?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.int8, values, byteEstimate: values.count * 8) { value, bytes in append(value, to: &bytes) }
    }

    /// `float8[]`, bit for bit (NaN and infinities included).
    public static func float8(_ values: [Double?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.float8, values, byteEstimate: values.count * 8) { value, bytes in append(value.bitPattern, to: &bytes) }
    }

    /// `bool[]`.
    public static func bool(_ values: [Bool?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.bool, values, byteEstimate: values.count) { value, bytes in bytes.append(value ? 1 : 0) }
    }

    /// `timestamptz[]` from microseconds since the Unix epoch (UTC).
    public static func timestamptz(microsecondsSinceUnixEpoch values: [Int64?]) -> PostgresBinaryArray {
        PostgresBinaryArray(.timestamptz, values, byteEstimate: values.count * 8) { value, bytes in
            append(value &- postgresEpochOffsetMicroseconds, to: &bytes)
        }
    }

    /// `uuid[]` from UUID text (hex digits in any case, with or without the four hyphens, as
    /// `uuid_in` would read them after validation elsewhere); `nil` is `NULL`. Nil when some value
    /// is not a UUID: the caller then sends text (`PostgresArray`) and lets the server say what is wrong.
    public static func uuid(_ values: [String?]) -> PostgresBinaryArray? {
        var invalid = false
        let array = PostgresBinaryArray(.uuid, values, byteEstimate: values.count * 16) { value, bytes in
            if !appendUUID(value, to: &bytes) { invalid = true }
        }
        return invalid ? nil : array
    }

    /// Appends the 16 bytes of a UUID written as 32 hex digits, optionally with hyphens between
    /// groups; false (and possibly a partial write, which the caller discards) when it is not one.
    private static func appendUUID(_ text: String, to bytes: inout [UInt8]) -> Bool {
        // withUTF8 reads a native string's bytes in place (a batch encodes thousands of ids).
        var text = text
        return text.withUTF8 { appendUUID(utf8: $0, to: &bytes) }
    }

    private static func appendUUID(utf8: UnsafeBufferPointer<UInt8>, to bytes: inout [UInt8]) -> Bool {
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
                bytes.append(first << 4 | nibble)
                written += 1
                high = nil
            } else {
                high = nibble
            }
        }
        return written == 16 && high == nil
    }

    private static func append<Integer: FixedWidthInteger>(_ value: Integer, to bytes: inout [UInt8]) {
        let bigEndian = value.bigEndian
        withUnsafeBytes(of: bigEndian) { bytes.append(contentsOf: $0) }
    }
}
