import Foundation

/// Well-known type OIDs from `pg_type.h`, the only ones this layer converts.
public enum PostgresTypeOID {
    public static let bool: UInt32 = 16
    public static let bytea: UInt32 = 17
    public static let name: UInt32 = 19
    public static let int8: UInt32 = 20
    public static let int2: UInt32 = 21
    public static let int4: UInt32 = 23
    public static let text: UInt32 = 25
    public static let oid: UInt32 = 26
    public static let float4: UInt32 = 700
    public static let float8: UInt32 = 701
    public static let bpchar: UInt32 = 1042
    public static let varchar: UInt32 = 1043
    public static let timestamp: UInt32 = 1114
    public static let timestamptz: UInt32 = 1184
    public static let numeric: UInt32 = 1700
    public static let uuid: UInt32 = 2950
}

/// A Swift type a column can be read as. Conversions are strict: the PostgreSQL type must be one
/// that holds the Swift type's values, so a schema change surfaces as a clear error.
public protocol PostgresDecodable: Sendable {
    /// Converts a non-NULL column's text.
    static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Self
    /// Converts a non-NULL column's text as libpq holds it (UTF-8, without its terminating zero);
    /// by default through `decode(postgresText:)`. Types read by the thousand (counts) read the
    /// bytes themselves rather than making a `String` of each.
    static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>, typeOID: UInt32, column: String) throws -> Self
    /// The value for SQL `NULL`, or nil when the type cannot hold NULL.
    static var postgresNull: Self? { get }
}

extension PostgresDecodable {
    public static var postgresNull: Self? { nil }

    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>, typeOID: UInt32, column: String) throws -> Self {
        try decode(postgresText: String(decoding: bytes, as: UTF8.self), typeOID: typeOID, column: column)
    }

    static func mismatch(_ column: String, _ text: String, _ oid: UInt32) -> PostgresError {
        PostgresError(kind: .typeMismatch, message: "column \(column) (type oid \(oid)) cannot be read as \(Self.self): \(text.prefix(64))")
    }
}

extension String: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> String {
        switch typeOID {
        case PostgresTypeOID.text, PostgresTypeOID.varchar, PostgresTypeOID.bpchar, PostgresTypeOID.name:
            return text
        default:
            throw mismatch(column, text, typeOID)
        }
    }
}

extension Int64: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Int64 {
        switch typeOID {
        case PostgresTypeOID.int2, PostgresTypeOID.int4, PostgresTypeOID.int8, PostgresTypeOID.oid:
            guard let value = Int64(text) else { throw mismatch(column, text, typeOID) }
            return value
        default:
            throw mismatch(column, text, typeOID)
        }
    }

    /// The integer types' text is an optional `-` and decimal digits (`int8out`); anything else,
    /// or a value outside Int64, is the same mismatch as from text.
    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>, typeOID: UInt32, column: String) throws -> Int64 {
        switch typeOID {
        case PostgresTypeOID.int2, PostgresTypeOID.int4, PostgresTypeOID.int8, PostgresTypeOID.oid:
            let negative = bytes.first == UInt8(ascii: "-")
            let digits = negative ? UnsafeBufferPointer(rebasing: bytes.dropFirst()) : bytes
            // Accumulated negatively, so that Int64.min (one more than Int64.max) fits too.
            var value: Int64 = 0
            var valid = !digits.isEmpty
            for byte in digits {
                let digit = Int64(byte) &- 48
                guard digit >= 0, digit <= 9 else { valid = false; break }
                let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (next, overflow2) = times10.subtractingReportingOverflow(digit)
                guard !overflow1, !overflow2 else { valid = false; break }
                value = next
            }
            if valid {
                if negative { return value }
                if value != .min { return -value }
            }
            throw mismatch(column, String(decoding: bytes, as: UTF8.self), typeOID)
        default:
            throw mismatch(column, String(decoding: bytes, as: UTF8.self), typeOID)
        }
    }
}

extension Int: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Int {
        Int(try Int64.decode(postgresText: text, typeOID: typeOID, column: column))
    }

    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>, typeOID: UInt32, column: String) throws -> Int {
        Int(try Int64.decode(postgresBytes: bytes, typeOID: typeOID, column: column))
    }
}

extension Double: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Double {
        switch typeOID {
        case PostgresTypeOID.float4, PostgresTypeOID.float8, PostgresTypeOID.numeric,
             PostgresTypeOID.int2, PostgresTypeOID.int4, PostgresTypeOID.int8:
            switch text {
            case "NaN": return .nan
            case "Infinity": return .infinity
            case "-Infinity": return -.infinity
            default:
                guard let value = Double(text) else { throw mismatch(column, text, typeOID) }
                return value
            }
        default:
            throw mismatch(column, text, typeOID)
        }
    }
}

extension Bool: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Bool {
        guard typeOID == PostgresTypeOID.bool else { throw mismatch(column, text, typeOID) }
        switch text {
        case "t": return true
        case "f": return false
        default: throw mismatch(column, text, typeOID)
        }
    }
}

extension UUID: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> UUID {
        guard typeOID == PostgresTypeOID.uuid, let value = UUID(uuidString: text) else { throw mismatch(column, text, typeOID) }
        return value
    }
}

extension Date: PostgresDecodable {
    /// Reads `timestamptz` (the session runs in UTC, see `PostgresConnection`) to the microsecond.
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Date {
        guard typeOID == PostgresTypeOID.timestamptz, let micros = PostgresTimestamp.parse(text) else {
            throw mismatch(column, text, typeOID)
        }
        return Date(timeIntervalSince1970: Double(micros) / 1_000_000)
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(postgresText text: String, typeOID: UInt32, column: String) throws -> Wrapped? {
        try Wrapped.decode(postgresText: text, typeOID: typeOID, column: column)
    }

    public static func decode(postgresBytes bytes: UnsafeBufferPointer<UInt8>, typeOID: UInt32, column: String) throws -> Wrapped? {
        try Wrapped.decode(postgresBytes: bytes, typeOID: typeOID, column: column)
    }

    public static var postgresNull: Wrapped?? { .some(nil) }
}
