import Timestamps

/// Writes JSON into a byte array: every response body goes through it.
///
/// Streaming calls (`beginObject`, `key`, `string`, …) instead of building a `JSONValue` first,
/// so handlers write members in the order the contract shows and no intermediate tree is built.
/// Commas are inserted automatically; the caller is responsible for balancing begin/end and for
/// writing a key before each value inside an object (programmer errors, not input errors).
public struct JSONWriter: Sendable {
    /// The JSON text written so far (UTF-8).
    public private(set) var bytes: [UInt8]
    /// Whether the last thing written was a complete value, so the next value or key needs a comma.
    private var afterValue = false

    public init(reservingCapacity capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    private mutating func separate() {
        if afterValue { bytes.append(UInt8(ascii: ",")) }
    }

    /// Opens an object or array (`bracket`): its first member follows without a comma.
    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        afterValue = false
    }

    /// Closes an object or array (`bracket`): what follows is a next value.
    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        afterValue = true
    }

    public mutating func beginObject() { open(UInt8(ascii: "{")) }

    public mutating func endObject() { close(UInt8(ascii: "}")) }

    /// Ends a line of JSON lines (a newline); the next value starts a new top-level value.
    public mutating func endLine() {
        bytes.append(UInt8(ascii: "\n"))
        afterValue = false
    }

    public mutating func beginArray() { open(UInt8(ascii: "[")) }

    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// Writes an object key and its colon; the next call writes its value.
    public mutating func key(_ name: String) {
        separate()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        afterValue = false
    }

    public mutating func string(_ text: String) {
        separate()
        appendQuoted(text)
        afterValue = true
    }

    public mutating func int<Integer: BinaryInteger>(_ number: Integer) {
        separate()
        if let small = Int64(exactly: number) {
            appendDecimal(small)
        } else {
            bytes.append(contentsOf: String(number).utf8)
        }
        afterValue = true
    }

    /// The decimal digits of `number`, written in place (a listing writes tens of thousands of
    /// counts; `String(number)` would allocate a string for each).
    private mutating func appendDecimal(_ number: Int64) {
        if number < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = number.magnitude
        // 20 digits hold UInt64.max, so Int64's magnitude always fits.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// Writes the shortest text that reads back as the same `Double` (Swift's `description`, which
    /// is valid JSON number syntax: `0.025`, `1e-07`, `1e+20`). JSON has no infinity or NaN, so a
    /// non-finite value is written as `null` rather than producing invalid JSON.
    public mutating func double(_ number: Double) {
        guard number.isFinite else { return null() }
        separate()
        bytes.append(contentsOf: number.description.utf8)
        afterValue = true
    }

    public mutating func bool(_ flag: Bool) {
        separate()
        bytes.append(contentsOf: flag ? "true".utf8 : "false".utf8)
        afterValue = true
    }

    public mutating func null() {
        separate()
        bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
        afterValue = true
    }

    /// Writes `text`, or `null` when it is `nil` (the contract echoes absent values as `null`).
    public mutating func string(_ text: String?) {
        if let text { string(text) } else { null() }
    }

    /// Writes a parsed value back; numbers keep their original lexeme.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .number(let number):
            separate()
            bytes.append(contentsOf: number.lexeme.utf8)
            afterValue = true
        case .string(let text): string(text)
        case .array(let elements):
            beginArray()
            for element in elements { self.value(element) }
            endArray()
        case .object(let members):
            beginObject()
            for name in members.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                key(name)
                if let member = members[name] { self.value(member) }
            }
            endObject()
        }
    }

    /// Appends `"text"` with `"`, `\` and U+0000…U+001F escaped; everything else, non-ASCII
    /// included, is copied as UTF-8 (Swift strings are always valid Unicode).
    private mutating func appendQuoted(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        // Most strings (ids, codes, timestamps) need no escaping: copy their UTF-8 whole.
        let copied = text.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        } ?? false
        if copied {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(0x5C); bytes.append(0x22)
            case UInt8(ascii: "\\"): bytes.append(0x5C); bytes.append(0x5C)
            case 0x0A: bytes.append(0x5C); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(0x5C); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(0x5C); bytes.append(UInt8(ascii: "t"))
            case 0x08: bytes.append(0x5C); bytes.append(UInt8(ascii: "b"))
            case 0x0C: bytes.append(0x5C); bytes.append(UInt8(ascii: "f"))
            case 0x00..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONWriter {
    /// Writes a timestamp in the contract's output form (UTC, `Z`, milliseconds), or `null`.
    public mutating func timestamp(_ value: Timestamp?) {
        if let value { string(value.rfc3339) } else { null() }
    }
}
