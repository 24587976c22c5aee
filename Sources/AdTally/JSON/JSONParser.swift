/// A strict RFC 8259 JSON parser for request bodies, built to survive anything a client sends.
///
/// - Iterative (an explicit stack, no recursion), with a nesting limit: `[[[[…` 100,000 deep is an
///   error at depth `maximumDepth + 1`, never a stack overflow.
/// - Strings must be valid UTF-8 (overlong forms, encoded surrogates and code points past U+10FFFF
///   are errors, not replaced); `\u` escapes must pair surrogates correctly.
/// - Numbers are kept as lexemes (`JSONNumber`), so `1e400` and 10,000-digit integers parse.
/// - A leading byte order mark is an error: RFC 8259 §8.1 says senders must not add one, and the
///   contract says bodies are UTF-8 JSON; accepting it would hide a client bug.
/// - A repeated object key keeps the last value.
/// - Anything after the value other than whitespace is an error.
public enum JSONParser {
    /// Deep enough for any real request (AdTally's bodies nest three levels), shallow enough that
    /// the values' recursive destruction and equality stay far from the stack limit.
    public static let defaultMaximumDepth = 64

    /// Parses a whole body.
    public static func parse(_ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer, maximumDepth: maximumDepth)
            return Result { () throws(JSONParseError) in try reader.parseDocument() }
        }
        return try result.get()
    }

    /// What a body's top level holds under one member name, as `scanMember` finds it.
    public enum MemberScan: Sendable, Equatable {
        /// The document is valid JSON but not an object.
        case notAnObject
        /// An object without that member.
        case absent
        /// An object whose member (its last occurrence: a repeated key keeps the last value, as in
        /// `parse`) is an array of `count` elements.
        case array(count: Int)
        /// An object whose member is something other than an array.
        case notAnArray
    }

    /// Validates a whole body exactly as `parse` does (the same errors, at the same bytes) and says
    /// what its top-level object holds under `key`, without building the document: only strings
    /// are decoded (so that keys compare after their escapes), no array or object is kept. Costs a
    /// fraction of `parse` on a large body: what the events bucket uses to price a batch it may
    /// refuse (`EventsRequest.cost(ofBody:)`).
    public static func scanMember(_ key: String, in bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(JSONParseError) -> MemberScan {
        let result: Result<MemberScan, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer, maximumDepth: maximumDepth)
            return Result { () throws(JSONParseError) in try reader.scanDocument(member: key) }
        }
        return try result.get()
    }

    /// Parses a whole body held in memory the caller owns (for example, a connection's buffer).
    public static func parse(_ buffer: UnsafeRawBufferPointer, maximumDepth: Int = defaultMaximumDepth) throws(JSONParseError) -> JSONValue {
        var reader = Reader(bytes: buffer.assumingMemoryBound(to: UInt8.self), maximumDepth: maximumDepth)
        return try reader.parseDocument()
    }
}

/// One parse in progress. Lives only for the duration of a `parse` call, so the buffer is valid.
private struct Reader {
    let bytes: UnsafeBufferPointer<UInt8>
    let maximumDepth: Int
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    /// An open array or object. Mutated in place on the stack so appends stay amortised O(1).
    struct Frame {
        var isObject: Bool
        var elements: [JSONValue] = []
        var members: [String: JSONValue] = [:]
        var pendingKey: String = ""
    }

    func fail(_ reason: JSONParseError.Reason, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(reason: reason, offset: offset ?? index)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The byte at `index`, or an `unexpectedEnd` error.
    func peek() throws(JSONParseError) -> UInt8 {
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        return bytes[index]
    }

    /// A document is not empty and does not start with a byte order mark (RFC 8259 section 8.1).
    func checkDocumentStart() throws(JSONParseError) {
        if bytes.isEmpty { throw fail(.empty) }
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF {
            throw fail(.byteOrderMark, at: 0)
        }
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        try checkDocumentStart()
        var stack: [Frame] = []
        var value: JSONValue

        parseValue: while true {
            skipWhitespace()
            let byte = try peek()
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard stack.count < maximumDepth else { throw fail(.tooDeep(limit: maximumDepth)) }
                index += 1
                skipWhitespace()
                if byte == UInt8(ascii: "{") {
                    if try peek() == UInt8(ascii: "}") {
                        index += 1
                        value = .object([:])
                    } else {
                        // Room for a typical event (nine members) up front: growing 1, 2, 4, 8, 16 rehashes every key.
                        var frame = Frame(isObject: true, members: Dictionary(minimumCapacity: 12))
                        frame.pendingKey = try parseKeyAndColon()
                        stack.append(frame)
                        continue parseValue
                    }
                } else {
                    if try peek() == UInt8(ascii: "]") {
                        index += 1
                        value = .array([])
                    } else {
                        stack.append(Frame(isObject: false))
                        continue parseValue
                    }
                }
            case UInt8(ascii: "\""):
                index += 1
                value = .string(try parseStringBody())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = .number(try parseNumber())
            case UInt8(ascii: "t"):
                try expectLiteral("true"); value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false"); value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null"); value = .null
            default:
                throw fail(.unexpectedByte(byte))
            }

            // A value is complete: hand it to the enclosing containers, closing them as they end.
            while true {
                guard !stack.isEmpty else {
                    skipWhitespace()
                    guard index == bytes.count else { throw fail(.trailingData) }
                    return value
                }
                let top = stack.count - 1
                skipWhitespace()
                let next = try peek()
                let isObject = stack[top].isObject
                if isObject {
                    stack[top].members[stack[top].pendingKey] = value
                } else {
                    stack[top].elements.append(value)
                }
                if next == UInt8(ascii: ",") {
                    index += 1
                    if isObject {
                        skipWhitespace()
                        stack[top].pendingKey = try parseKeyAndColon()
                    }
                    continue parseValue
                }
                guard next == UInt8(ascii: isObject ? "}" : "]") else { throw fail(.unexpectedByte(next)) }
                index += 1
                let closed = stack.removeLast()
                value = isObject ? .object(closed.members) : .array(closed.elements)
            }
        }
    }

    /// `JSONParser.scanMember`: `parseDocument`'s grammar and checks, keeping only what the top-level
    /// object holds under `wanted`. (Written beside `parseDocument` rather than through it, so that
    /// the parse every body takes builds its values with no test for a mode.)
    mutating func scanDocument(member wanted: String) throws(JSONParseError) -> JSONParser.MemberScan {
        try checkDocumentStart()
        /// An open container: its kind, its elements so far (arrays), its current key (objects).
        struct OpenContainer {
            var isObject: Bool
            var count = 0
            var key = ""
        }
        /// What a finished value was, as far as the answer cares.
        enum Shape { case array(Int), object, scalar }
        var stack: [OpenContainer] = []
        var found: JSONParser.MemberScan = .absent
        var shape: Shape

        scanValue: while true {
            skipWhitespace()
            let byte = try peek()
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard stack.count < maximumDepth else { throw fail(.tooDeep(limit: maximumDepth)) }
                index += 1
                skipWhitespace()
                if byte == UInt8(ascii: "{") {
                    if try peek() == UInt8(ascii: "}") {
                        index += 1
                        shape = .object
                    } else {
                        stack.append(OpenContainer(isObject: true, key: try parseKeyAndColon()))
                        continue scanValue
                    }
                } else {
                    if try peek() == UInt8(ascii: "]") {
                        index += 1
                        shape = .array(0)
                    } else {
                        stack.append(OpenContainer(isObject: false))
                        continue scanValue
                    }
                }
            case UInt8(ascii: "\""):
                index += 1
                _ = try parseStringBody()
                shape = .scalar
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                _ = try parseNumber()
                shape = .scalar
            case UInt8(ascii: "t"):
                try expectLiteral("true"); shape = .scalar
            case UInt8(ascii: "f"):
                try expectLiteral("false"); shape = .scalar
            case UInt8(ascii: "n"):
                try expectLiteral("null"); shape = .scalar
            default:
                throw fail(.unexpectedByte(byte))
            }

            while true {
                guard !stack.isEmpty else {
                    skipWhitespace()
                    guard index == bytes.count else { throw fail(.trailingData) }
                    if case .object = shape { return found }
                    return .notAnObject
                }
                let top = stack.count - 1
                skipWhitespace()
                let next = try peek()
                let isObject = stack[top].isObject
                if isObject {
                    if top == 0, stack[0].key == wanted {
                        if case .array(let count) = shape { found = .array(count: count) } else { found = .notAnArray }
                    }
                } else {
                    stack[top].count += 1
                }
                if next == UInt8(ascii: ",") {
                    index += 1
                    if isObject {
                        skipWhitespace()
                        stack[top].key = try parseKeyAndColon()
                    }
                    continue scanValue
                }
                guard next == UInt8(ascii: isObject ? "}" : "]") else { throw fail(.unexpectedByte(next)) }
                index += 1
                let closed = stack.removeLast()
                shape = closed.isObject ? .object : .array(closed.count)
            }
        }
    }

    /// Parses `"key"` then `:`, with `index` at the opening quote (whitespace already skipped).
    mutating func parseKeyAndColon() throws(JSONParseError) -> String {
        let byte = try peek()
        guard byte == UInt8(ascii: "\"") else { throw fail(.unexpectedByte(byte)) }
        index += 1
        let key = try parseStringBody()
        skipWhitespace()
        let colon = try peek()
        guard colon == UInt8(ascii: ":") else { throw fail(.unexpectedByte(colon)) }
        index += 1
        return key
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        let start = literal.utf8Start
        for offset in 0..<count {
            guard index < bytes.count else { throw fail(.unexpectedEnd) }
            guard bytes[index] == start[offset] else { throw fail(.unexpectedByte(bytes[index])) }
            index += 1
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
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
        let lexeme = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        return JSONNumber(validatedLexeme: lexeme, isIntegerLexeme: isInteger)
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    mutating func skipDigits() {
        while index < bytes.count && isDigit(bytes[index]) { index += 1 }
    }

    /// Parses a string's contents and closing quote, with `index` just past the opening quote.
    /// Unescaped runs are validated in place and copied once; escapes go through a scratch buffer
    /// only when the string has any.
    mutating func parseStringBody() throws(JSONParseError) -> String {
        var scratch: [UInt8] = []
        var hasEscapes = false
        var runStart = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[runStart..<index])
                index += 1
                if !hasEscapes { return String(decoding: run, as: UTF8.self) }
                scratch.append(contentsOf: run)
                return String(decoding: scratch, as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") {
                if !hasEscapes {
                    hasEscapes = true
                    scratch.reserveCapacity(index - runStart + 16)
                }
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                try parseEscape(into: &scratch)
                runStart = index
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
    func validUTF8SequenceLength(at start: Int) throws(JSONParseError) -> Int {
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

    /// Parses one escape, with `index` at the backslash, appending its UTF-8 to `scratch`.
    mutating func parseEscape(into scratch: inout [UInt8]) throws(JSONParseError) {
        let escapeStart = index
        index += 1
        guard index < bytes.count else { throw fail(.unexpectedEnd) }
        let letter = bytes[index]
        index += 1
        switch letter {
        case UInt8(ascii: "\""): scratch.append(0x22)
        case UInt8(ascii: "\\"): scratch.append(0x5C)
        case UInt8(ascii: "/"): scratch.append(0x2F)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try parseHex4()
            var scalarValue = UInt32(unit)
            if unit >= 0xDC00 && unit <= 0xDFFF {
                throw fail(.loneSurrogate, at: escapeStart)
            }
            if unit >= 0xD800 && unit <= 0xDBFF {
                guard index + 1 < bytes.count,
                      bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw fail(.loneSurrogate, at: escapeStart) }
                index += 2
                let low = try parseHex4()
                guard low >= 0xDC00 && low <= 0xDFFF else { throw fail(.loneSurrogate, at: escapeStart) }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            }
            guard let scalar = Unicode.Scalar(scalarValue) else { throw fail(.loneSurrogate, at: escapeStart) }
            appendUTF8(of: scalar, to: &scratch)
        default:
            throw fail(.invalidEscape, at: escapeStart)
        }
    }

    func appendUTF8(of scalar: Unicode.Scalar, to scratch: inout [UInt8]) {
        let value = scalar.value
        switch value {
        case 0..<0x80:
            scratch.append(UInt8(value))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (value >> 6)))
            scratch.append(UInt8(0x80 | (value & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (value >> 12)))
            scratch.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (value & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (value >> 18)))
            scratch.append(UInt8(0x80 | ((value >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((value >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (value & 0x3F)))
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt16 {
        guard index + 4 <= bytes.count else { throw fail(.unexpectedEnd) }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail(.invalidEscape)
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }
}
