import Foundation

/// A Swift value that can be sent as a bound query parameter. Every value travels next to the SQL,
/// never inside it (postgres-nio's `PostgresQuery` model), so a quote or a `;` in a value is just
/// data.
public protocol PostgresBindable: Sendable {
    /// The parameter as it goes over the wire.
    var postgresParameter: PostgresParameter { get }
}

/// A parameter's wire form.
public enum PostgresParameter: Sendable, Equatable {
    /// PostgreSQL's text format; `nil` is SQL `NULL`.
    case text(String?)
    /// PostgreSQL's binary format (the type's `*_recv` reads it), for values whose text form costs
    /// the server real parsing work (`PostgresBinaryArray`).
    case binary([UInt8])
}

/// A value whose text form is its parameter: most scalars.
public protocol PostgresTextBindable: PostgresBindable {
    /// The parameter's text representation, or `nil` for SQL `NULL`.
    var postgresText: String? { get }
}

extension PostgresTextBindable {
    public var postgresParameter: PostgresParameter { .text(postgresText) }
}

extension String: PostgresTextBindable {
    public var postgresText: String? { self }
}

extension Int: PostgresTextBindable {
    public var postgresText: String? { String(self) }
}

extension Int64: PostgresTextBindable {
    public var postgresText: String? { String(self) }
}

extension Int32: PostgresTextBindable {
    public var postgresText: String? { String(self) }
}

extension Double: PostgresTextBindable {
    /// Finite values round-trip exactly (Swift prints the shortest exact decimal); infinities and
    /// NaN use PostgreSQL's spellings.
    public var postgresText: String? {
        if isNaN { return "NaN" }
        if isInfinite { return self > 0 ? "Infinity" : "-Infinity" }
        return "\(self)"
    }
}

extension Bool: PostgresTextBindable {
    public var postgresText: String? { self ? "t" : "f" }
}

extension UUID: PostgresTextBindable {
    public var postgresText: String? { uuidString.lowercased() }
}

extension Date: PostgresTextBindable {
    /// Microsecond precision in UTC with an explicit offset, so the session time zone never matters.
    public var postgresText: String? { PostgresTimestamp.format(microseconds: PostgresTimestamp.microseconds(of: self)) }
}

extension Optional: PostgresBindable, PostgresTextBindable where Wrapped: PostgresTextBindable {
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
public struct PostgresArray: PostgresTextBindable {
    /// The element texts; `nil` is `NULL`.
    public let elements: [String?]

    /// Creates an array parameter from any bindable elements.
    public init<Element: PostgresTextBindable>(_ values: [Element]) {
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
