import Foundation

/// A Swift value that can be sent as a bound query parameter. Every value travels in PostgreSQL's
/// text format next to the SQL, never inside it (postgres-nio's `PostgresQuery` model), so a quote
/// or a `;` in a value is just data.
public protocol PostgresBindable: Sendable {
    /// The parameter's text representation, or `nil` for SQL `NULL`.
    var postgresText: String? { get }
}

extension String: PostgresBindable {
    public var postgresText: String? { self }
}

extension Int: PostgresBindable {
    public var postgresText: String? { String(self) }
}

extension Int64: PostgresBindable {
    public var postgresText: String? { String(self) }
}

extension Int32: PostgresBindable {
    public var postgresText: String? { String(self) }
}

extension Double: PostgresBindable {
    /// Finite values round-trip exactly (Swift prints the shortest exact decimal); infinities and
    /// NaN use PostgreSQL's spellings.
    public var postgresText: String? {
        if isNaN { return "NaN" }
        if isInfinite { return self > 0 ? "Infinity" : "-Infinity" }
        return "\(self)"
    }
}

extension Bool: PostgresBindable {
    public var postgresText: String? { self ? "t" : "f" }
}

extension UUID: PostgresBindable {
    public var postgresText: String? { uuidString.lowercased() }
}

extension Date: PostgresBindable {
    /// Microsecond precision in UTC with an explicit offset, so the session time zone never matters.
    public var postgresText: String? { PostgresTimestamp.format(microseconds: PostgresTimestamp.microseconds(of: self)) }
}

extension Optional: PostgresBindable where Wrapped: PostgresBindable {
    public var postgresText: String? {
        switch self {
        case .none: return nil
        case .some(let value): return value.postgresText
        }
    }
}

/// A one-dimensional array parameter (`text[]`, `bigint[]`, ...) so that a whole batch travels as a
/// few arrays and set-based SQL (`unnest($1::text[], $2::int[])`) handles it in one statement.
/// Elements may be `nil` (SQL `NULL`).
public struct PostgresArray: PostgresBindable {
    /// The element texts; `nil` is `NULL`.
    public let elements: [String?]

    /// Creates an array parameter from any bindable elements.
    public init<Element: PostgresBindable>(_ values: [Element]) {
        self.elements = values.map { $0.postgresText }
    }

    /// The array literal: every element double-quoted with `"` and `\` escaped, so commas, braces,
    /// quotes and the word NULL inside a value stay data.
    public var postgresText: String? {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(elements.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            guard let element else {
                bytes.append(contentsOf: "NULL".utf8)
                continue
            }
            bytes.append(UInt8(ascii: "\""))
            let appended = element.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
                // The common case (identifiers, numbers, timestamps) needs no escaping: copy it whole.
                guard !utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
                bytes.append(contentsOf: utf8)
                return true
            } ?? false
            if !appended {
                for byte in element.utf8 {
                    // In UTF-8 a quote or backslash byte is always that character, never part of another.
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
                    bytes.append(byte)
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
