/// The one reader of JSON text (RFC 8259): a pull tokenizer that checks the whole grammar as it
/// goes and hands out tokens that point into the bytes, decoding nothing it is not asked to. Every
/// consumer reads through it: `JSONParser.parse` builds a `JSONValue` tree from its tokens,
/// `JSONParser.scanMember` counts a member's elements without keeping anything, and the events
/// decoder reads an events body straight into its members. So a body means the same to each, and
/// each fails at the same byte with the same `JSONParseError`.
///
/// - Iterative, with a nesting limit (`maximumDepth`): `[[[[…` 100,000 deep is an error at depth
///   `maximumDepth + 1`, never a stack overflow.
/// - Strings are checked as they are passed: valid UTF-8 (no overlong forms, encoded surrogates or
///   code points past U+10FFFF), escapes well formed and `\u` surrogates paired. Their text is
///   decoded only when a consumer asks (`string(_:)`, `equals(_:_:)`).
/// - Numbers are checked against the grammar and handed out as their lexeme (`number(_:)`), so
///   `1e400` and 10,000-digit integers are read without trapping or rounding.
/// - A leading byte order mark is an error: RFC 8259 §8.1 says senders must not add one.
/// - After the value, only whitespace: anything else is an error, reported when the value ends.
///
/// The bytes must stay valid while the tokenizer and its tokens are used (the caller's
/// `withUnsafeBufferPointer`).
public struct JSONTokenizer {
    /// Deep enough for any real request (AdTally's bodies nest three levels), shallow enough that
    /// a tree built from the tokens stays far from the stack limit when it is destroyed or compared.
    public static let defaultMaximumDepth = 64

    public let bytes: UnsafeBufferPointer<UInt8>
    public let maximumDepth: Int
    /// The offset of the next byte to read.
    public private(set) var index = 0
    /// The open containers, innermost last: `true` for an object.
    private var open: [Bool] = []
    private var state: State = .start

    private enum State {
        /// Nothing read yet.
        case start
        /// A value comes next.
        case value
        /// The first key of an object just opened comes next.
        case firstKey
        /// An empty object or array was opened: its end comes next.
        case emptyEnd(isObject: Bool)
        /// A value just ended: a comma, the end of its container, or the end of the text comes next.
        case afterValue
        /// `.end` was handed out.
        case finished
    }

    public init(bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int = JSONTokenizer.defaultMaximumDepth) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        open.reserveCapacity(8)
    }

    /// How many containers are open: 0 at the top level, 1 inside the outermost object or array.
    public var depth: Int { open.count }

    /// The next token, or the error at the first byte that breaks the grammar. After `.end`, `.end`
    /// again.
    public mutating func next() throws(JSONParseError) -> JSONToken {
        switch state {
        case .start:
            if bytes.isEmpty { throw fail(.empty) }
            if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { throw fail(.byteOrderMark, at: 0) }
            return try value()
        case .value:
            return try value()
        case .firstKey:
            state = .value
            return .key(try keyAndColon())
        case .emptyEnd(let isObject):
            state = .afterValue
            return isObject ? .endObject : .endArray
        case .afterValue:
            guard let isObject = open.last else {
                skipWhitespace()
                guard index == bytes.count else { throw fail(.trailingData) }
                state = .finished
                return .end
            }
            skipWhitespace()
            let next = try peek()
            if next == UInt8(ascii: ",") {
                index += 1
                if isObject {
                    skipWhitespace()
                    state = .value
                    return .key(try keyAndColon())
                }
                return try value()
            }
            guard next == UInt8(ascii: isObject ? "}" : "]") else { throw fail(.unexpectedByte(next)) }
            index += 1
            open.removeLast()
            return isObject ? .endObject : .endArray
        case .finished:
            return .end
        }
    }

    /// Skips the value that comes next (after a key, or as an array element), checking it as
    /// every token is checked. Returns the token that began it (`.endArray` when the array it was
    /// to be an element of ended instead).
    @discardableResult
    public mutating func skipValue() throws(JSONParseError) -> JSONToken {
        let first = try next()
        try skipRest(of: first)
        return first
    }

    /// Skips the rest of the value whose first token `next` just handed out: nothing for a scalar,
    /// the members or elements and the end of an object or array.
    public mutating func skipRest(of first: JSONToken) throws(JSONParseError) {
        guard first == .beginObject || first == .beginArray else { return }
        if case .emptyEnd = state {
            _ = try next()
            return
        }
        // A non-empty container is open at this depth until its end takes the depth below it.
        let level = depth
        while true {
            let token = try next()
            if depth < level, token == .endObject || token == .endArray { return }
        }
    }

    /// A value, with `index` before it (whitespace not yet skipped).
    private mutating func value() throws(JSONParseError) -> JSONToken {
        skipWhitespace()
        let byte = try peek()
        switch byte {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard open.count < maximumDepth else { throw fail(.tooDeep(limit: maximumDepth)) }
            index += 1
            skipWhitespace()
            let isObject = byte == UInt8(ascii: "{")
            if try peek() == UInt8(ascii: isObject ? "}" : "]") {
                index += 1
                state = .emptyEnd(isObject: isObject)
            } else {
                open.append(isObject)
                state = isObject ? .firstKey : .value
            }
            return isObject ? .beginObject : .beginArray
        case UInt8(ascii: "\""):
            index += 1
            let text = try stringBody()
            state = .afterValue
            return .string(text)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let number = try numberLexeme()
            state = .afterValue
            return .number(number)
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            state = .afterValue
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            state = .afterValue
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            state = .afterValue
            return .null
        default:
            throw fail(.unexpectedByte(byte))
        }
    }

    // MARK: What a token holds

    /// The text of a string or key token, its escapes decoded.
    public func string(_ text: JSONText) -> String {
        let raw = UnsafeBufferPointer(rebasing: bytes[text.start..<text.end])
        guard text.hasEscapes else { return String(decoding: raw, as: UTF8.self) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(raw.count)
        var offset = text.start
        while offset < text.end {
            let byte = bytes[offset]
            guard byte == UInt8(ascii: "\\") else {
                decoded.append(byte)
                offset += 1
                continue
            }
            offset = Self.appendEscape(bytes, at: offset, to: &decoded)
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// Whether a string or key token's text is exactly `word` (ASCII): a byte comparison when it has
    /// no escapes, else a comparison of its decoded text.
    public func equals(_ text: JSONText, _ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard !text.hasEscapes else { return string(text).utf8.elementsEqual(UnsafeBufferPointer(start: word.utf8Start, count: count)) }
        guard text.end - text.start == count else { return false }
        let start = word.utf8Start
        var offset = 0
        while offset < count {
            if bytes[text.start + offset] != start[offset] { return false }
            offset += 1
        }
        return true
    }

    /// The number of a number token, as its lexeme.
    public func number(_ lexeme: JSONNumberLexeme) -> JSONNumber {
        JSONNumber(validatedLexeme: String(decoding: UnsafeBufferPointer(rebasing: bytes[lexeme.start..<lexeme.end]), as: UTF8.self),
                   isIntegerLexeme: lexeme.isInteger)
    }

    // MARK: The grammar

    private func fail(_ reason: JSONParseError.Reason, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(reason: reason, offset: offset ?? index)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The byte at `index`, or an `unexpectedEnd` error.
    private func peek() throws(JSONParseError) -> UInt8 {
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        return bytes[index]
    }

    /// `"key"` then `:`, with `index` at the opening quote (whitespace already skipped).
    private mutating func keyAndColon() throws(JSONParseError) -> JSONText {
        let byte = try peek()
        guard byte == UInt8(ascii: "\"") else { throw fail(.unexpectedByte(byte)) }
        index += 1
        let key = try stringBody()
        skipWhitespace()
        let colon = try peek()
        guard colon == UInt8(ascii: ":") else { throw fail(.unexpectedByte(colon)) }
        index += 1
        return key
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        let start = literal.utf8Start
        for offset in 0..<count {
            guard index < bytes.count else { throw fail(.unexpectedEnd) }
            guard bytes[index] == start[offset] else { throw fail(.unexpectedByte(bytes[index])) }
            index += 1
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func numberLexeme() throws(JSONParseError) -> JSONNumberLexeme {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw fail(.invalidNumber, at: start) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if isDigit(bytes[index]) {
            skipDigits()
        } else {
            throw fail(.invalidNumber, at: start)
        }
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.invalidNumber, at: start) }
            skipDigits()
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            isInteger = false
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail(.invalidNumber, at: start) }
            skipDigits()
        }
        return JSONNumberLexeme(start: start, end: index, isInteger: isInteger)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while index < bytes.count && isDigit(bytes[index]) { index += 1 }
    }

    /// Checks a string's contents and closing quote, with `index` just past the opening quote.
    private mutating func stringBody() throws(JSONParseError) -> JSONText {
        let start = index
        var hasEscapes = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return JSONText(start: start, end: index - 1, hasEscapes: hasEscapes)
            }
            if byte == UInt8(ascii: "\\") {
                hasEscapes = true
                try checkEscape()
                continue
            }
            if byte < 0x20 { throw fail(.controlCharacterInString) }
            if byte < 0x80 {
                index += 1
            } else {
                index += try validUTF8SequenceLength(at: index)
            }
        }
        throw fail(.unexpectedEnd)
    }

    /// Checks one multi-byte UTF-8 sequence against Unicode's table of well-formed sequences
    /// (Table 3-7): no overlong forms, no encoded surrogates, nothing above U+10FFFF.
    private func validUTF8SequenceLength(at start: Int) throws(JSONParseError) -> Int {
        let lead = bytes[start]
        let length: Int
        var secondLow: UInt8 = 0x80
        var secondHigh: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondLow = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondHigh = 0x9F
        case 0xF0: length = 4; secondLow = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondHigh = 0x8F
        default: throw fail(.invalidUTF8, at: start)
        }
        guard start + length <= bytes.count else { throw fail(.invalidUTF8, at: start) }
        let second = bytes[start + 1]
        guard second >= secondLow && second <= secondHigh else { throw fail(.invalidUTF8, at: start) }
        var offset = 2
        while offset < length {
            guard bytes[start + offset] & 0xC0 == 0x80 else { throw fail(.invalidUTF8, at: start) }
            offset += 1
        }
        return length
    }

    /// Checks one escape, with `index` at the backslash, and moves past it.
    private mutating func checkEscape() throws(JSONParseError) {
        let escapeStart = index
        index += 1
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        let letter = bytes[index]
        index += 1
        switch letter {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
             UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return
        case UInt8(ascii: "u"):
            let unit = try hex4()
            if unit >= 0xDC00 && unit <= 0xDFFF { throw fail(.loneSurrogate, at: escapeStart) }
            guard unit >= 0xD800 && unit <= 0xDBFF else { return }
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw fail(.loneSurrogate, at: escapeStart)
            }
            index += 2
            let low = try hex4()
            guard low >= 0xDC00 && low <= 0xDFFF else { throw fail(.loneSurrogate, at: escapeStart) }
        default:
            throw fail(.invalidEscape, at: escapeStart)
        }
    }

    private mutating func hex4() throws(JSONParseError) -> UInt16 {
        guard index + 4 <= bytes.count else { throw fail(.unexpectedEnd) }
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let digit = Self.hexDigit(bytes[index]) else { throw fail(.invalidEscape) }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Appends the UTF-8 of the escape at `offset` (checked already by `checkEscape`) and returns
    /// the offset after it.
    private static func appendEscape(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int, to out: inout [UInt8]) -> Int {
        let letter = bytes[offset + 1]
        switch letter {
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            let unit = hex4(bytes, at: offset + 2)
            guard unit >= 0xD800 && unit <= 0xDBFF else {
                appendUTF8(UInt32(unit), to: &out)
                return offset + 6
            }
            let low = hex4(bytes, at: offset + 8)
            appendUTF8(0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00), to: &out)
            return offset + 12
        default:
            // `"`, `\` and `/` stand for themselves.
            out.append(letter)
        }
        return offset + 2
    }

    /// Four hexadecimal digits `checkEscape` has checked.
    private static func hex4(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt16 {
        var value: UInt16 = 0
        for position in offset..<(offset + 4) {
            value = value << 4 | UInt16(hexDigit(bytes[position]) ?? 0)
        }
        return value
    }

    private static func appendUTF8(_ value: UInt32, to out: inout [UInt8]) {
        switch value {
        case 0..<0x80:
            out.append(UInt8(value))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | (value >> 6)))
            out.append(UInt8(0x80 | (value & 0x3F)))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | (value >> 12)))
            out.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (value & 0x3F)))
        default:
            out.append(UInt8(0xF0 | (value >> 18)))
            out.append(UInt8(0x80 | ((value >> 12) & 0x3F)))
            out.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (value & 0x3F)))
        }
    }
}

/// One token of `JSONTokenizer`.
public enum JSONToken: Equatable, Sendable {
    case beginObject, endObject, beginArray, endArray
    /// A member's name; its value comes next.
    case key(JSONText)
    case string(JSONText)
    case number(JSONNumberLexeme)
    case bool(Bool)
    case null
    /// The end of the text: the value is complete and only whitespace followed it.
    case end
}

/// Where a string's text lies in the tokenizer's bytes (between its quotes), checked, and whether it
/// has escapes to decode (`JSONTokenizer.string(_:)`).
public struct JSONText: Equatable, Sendable {
    public let start: Int
    public let end: Int
    public let hasEscapes: Bool
}

/// Where a number's lexeme lies in the tokenizer's bytes, checked, and whether it is a JSON integer
/// (no fraction, no exponent).
public struct JSONNumberLexeme: Equatable, Sendable {
    public let start: Int
    public let end: Int
    public let isInteger: Bool
}
