@testable import JSON
import Testing

/// RFC 8259 strictness and survival: every case names the rule it pins.
@Suite(.timeLimit(.minutes(3))) struct JSONParserTests {
    struct Accepted: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        let expected: JSONValue
        init(_ name: String, _ text: String, _ expected: JSONValue) {
            self.name = name; self.bytes = Array(text.utf8); self.expected = expected
        }
        init(_ name: String, bytes: [UInt8], _ expected: JSONValue) {
            self.name = name; self.bytes = bytes; self.expected = expected
        }
        var testDescription: String { name }
    }

    static func number(_ lexeme: String, integer: Bool) -> JSONValue {
        .number(JSONNumber(validatedLexeme: lexeme, isIntegerLexeme: integer))
    }

    static let accepted: [Accepted] = [
        Accepted("every kind of value", #"{"a":[1,-2.5e3,true,false,null,"x"],"b":{}}"#,
                 .object(["a": .array([number("1", integer: true), number("-2.5e3", integer: false),
                                       .bool(true), .bool(false), .null, .string("x")]),
                          "b": .object([:])])),
        Accepted("insignificant whitespace everywhere", " \t\r\n{ \"a\" : [ 1 , 2 ] }\n ",
                 .object(["a": .array([number("1", integer: true), number("2", integer: true)])])),
        Accepted("top-level string", #""x""#, .string("x")),
        Accepted("top-level number", "0", number("0", integer: true)),
        Accepted("top-level null", "null", .null),
        Accepted("empty array and object", "[[],{}]", .array([.array([]), .object([:])])),
        Accepted("simple escapes", #""\"\\\/\b\f\n\r\t""#, .string("\"\\/\u{8}\u{C}\n\r\t")),
        Accepted("unicode escapes BMP", #""\u0041\u00e9\u20AC""#, .string("Aé€")),
        Accepted("surrogate pair escape", #""\ud83d\ude00""#, .string("😀")),
        Accepted("surrogate pair escape uppercase hex", #""\uD83D\uDE00""#, .string("😀")),
        Accepted("escaped NUL", #""a\u0000b""#, .string("a\u{0}b")),
        Accepted("raw multibyte UTF-8", "\"é€😀\"", .string("é€😀")),
        Accepted("escapes mixed with raw runs", #""ab\ncd\u00e9ef""#, .string("ab\ncdéef")),
        Accepted("DEL is not a control character in JSON", "\"\u{7F}\"", .string("\u{7F}")),
        Accepted("duplicate keys: last value wins", #"{"a":1,"a":2}"#, .object(["a": number("2", integer: true)])),
        Accepted("duplicate keys in nested object", #"{"o":{"k":"x","k":null}}"#, .object(["o": .object(["k": .null])])),
        Accepted("negative zero is an integer lexeme", "-0", number("-0", integer: true)),
        Accepted("exponent makes a non-integer lexeme", "1E+2", number("1E+2", integer: false)),
        Accepted("huge exponent parses", "1e400", number("1e400", integer: false)),
        Accepted("nesting exactly at the limit (64)", String(repeating: "[", count: 64) + String(repeating: "]", count: 64),
                 (0..<63).reduce(JSONValue.array([])) { inner, _ in .array([inner]) }),
    ]

    @Test(arguments: accepted)
    func accepts(_ testCase: Accepted) throws {
        #expect(try JSONParser.parse(testCase.bytes) == testCase.expected)
    }

    struct Rejected: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        let reason: JSONParseError.Reason
        init(_ name: String, _ text: String, _ reason: JSONParseError.Reason) {
            self.name = name; self.bytes = Array(text.utf8); self.reason = reason
        }
        init(_ name: String, bytes: [UInt8], _ reason: JSONParseError.Reason) {
            self.name = name; self.bytes = bytes; self.reason = reason
        }
        var testDescription: String { name }
    }

    static func ascii(_ character: Unicode.Scalar) -> UInt8 { UInt8(character.value) }

    static let rejected: [Rejected] = [
        Rejected("empty body", "", .empty),
        Rejected("only whitespace", "  \n", .unexpectedEnd),
        Rejected("byte order mark before object", bytes: [0xEF, 0xBB, 0xBF] + Array("{}".utf8), .byteOrderMark),
        Rejected("trailing comma in array", "[1,]", .unexpectedByte(ascii("]"))),
        Rejected("trailing comma in object", #"{"a":1,}"#, .unexpectedByte(ascii("}"))),
        Rejected("leading comma in array", "[,1]", .unexpectedByte(ascii(","))),
        Rejected("NaN literal", "NaN", .unexpectedByte(ascii("N"))),
        Rejected("Infinity literal", "[Infinity]", .unexpectedByte(ascii("I"))),
        Rejected("negative Infinity", "-Infinity", .invalidNumber),
        Rejected("leading zero at top level", "01", .trailingData),
        Rejected("leading zero in array", "[01]", .unexpectedByte(ascii("1"))),
        Rejected("fraction without digits", "1.", .invalidNumber),
        Rejected("fraction without integer part", ".5", .unexpectedByte(ascii("."))),
        Rejected("exponent without digits", "1e", .invalidNumber),
        Rejected("exponent sign without digits", "1e+", .invalidNumber),
        Rejected("plus sign", "+1", .unexpectedByte(ascii("+"))),
        Rejected("lone minus", "-", .invalidNumber),
        Rejected("hex number", "0x10", .trailingData),
        Rejected("single-quoted string", "'a'", .unexpectedByte(ascii("'"))),
        Rejected("unterminated string", #""abc"#, .unexpectedEnd),
        Rejected("raw tab in string", "\"a\tb\"", .controlCharacterInString),
        Rejected("raw newline in string", "\"a\nb\"", .controlCharacterInString),
        Rejected("invalid escape letter", #""\x41""#, .invalidEscape),
        Rejected("invalid hex in \\u escape", #""\u12G4""#, .invalidEscape),
        Rejected("lone high surrogate", #""\ud83d""#, .loneSurrogate),
        Rejected("lone low surrogate", #""\ude00""#, .loneSurrogate),
        Rejected("high surrogate then BMP escape", #""\ud83d\u0041""#, .loneSurrogate),
        Rejected("high surrogate then other escape", #""\ud83d\n""#, .loneSurrogate),
        Rejected("two high surrogates", #""\ud83d\ud83d""#, .loneSurrogate),
        Rejected("byte 0xFF in string", bytes: [0x22, 0x61, 0xFF, 0x22], .invalidUTF8),
        Rejected("lone continuation byte", bytes: [0x22, 0x80, 0x22], .invalidUTF8),
        Rejected("overlong slash C0 AF", bytes: [0x22, 0xC0, 0xAF, 0x22], .invalidUTF8),
        Rejected("overlong three-byte E0 80 AF", bytes: [0x22, 0xE0, 0x80, 0xAF, 0x22], .invalidUTF8),
        Rejected("UTF-8 encoded surrogate ED A0 80", bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], .invalidUTF8),
        Rejected("beyond U+10FFFF F4 90 80 80", bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], .invalidUTF8),
        Rejected("F5 lead byte", bytes: [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], .invalidUTF8),
        Rejected("truncated sequence before quote", bytes: [0x22, 0xE2, 0x82, 0x22], .invalidUTF8),
        Rejected("truncated sequence at end of body", bytes: [0x22, 0xE2, 0x82], .invalidUTF8),
        Rejected("invalid UTF-8 in a key", bytes: Array(#"{""#.utf8) + [0xFF] + Array(#"":1}"#.utf8), .invalidUTF8),
        Rejected("non-ASCII outside strings", bytes: [0x5B, 0xC3, 0xA9, 0x5D], .unexpectedByte(0xC3)),
        Rejected("trailing garbage", "{} x", .trailingData),
        Rejected("two documents", "{}{}", .trailingData),
        Rejected("missing colon", #"{"a" 1}"#, .unexpectedByte(ascii("1"))),
        Rejected("missing comma", "[1 2]", .unexpectedByte(ascii("2"))),
        Rejected("unquoted key", "{a:1}", .unexpectedByte(ascii("a"))),
        Rejected("number key", "{1:1}", .unexpectedByte(ascii("1"))),
        Rejected("truncated literal", "tru", .unexpectedEnd),
        Rejected("misspelled literal", "trux", .unexpectedByte(ascii("x"))),
        Rejected("capitalised literal", "True", .unexpectedByte(ascii("T"))),
        Rejected("unclosed array", "[1", .unexpectedEnd),
        Rejected("unclosed object", #"{"a":1"#, .unexpectedEnd),
        Rejected("mismatched brackets", "[1}", .unexpectedByte(ascii("}"))),
        Rejected("nesting one past the limit", String(repeating: "[", count: 65) + String(repeating: "]", count: 65), .tooDeep(limit: 64)),
        Rejected("empty container one past the limit", String(repeating: "[", count: 64) + "{}" + String(repeating: "]", count: 64), .tooDeep(limit: 64)),
        Rejected("arrays nested 100,000 deep", String(repeating: "[", count: 100_000), .tooDeep(limit: 64)),
        Rejected("objects nested 100,000 deep", String(repeating: #"{"a":"#, count: 100_000), .tooDeep(limit: 64)),
    ]

    @Test(arguments: rejected)
    func rejects(_ testCase: Rejected) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(testCase.bytes) }
        do {
            _ = try JSONParser.parse(testCase.bytes)
        } catch {
            #expect(error.reason == testCase.reason)
            #expect(!error.description.isEmpty)
        }
    }

    @Test func everyProperPrefixOfADocumentIsRejected() {
        let text = Array(#"{"a":[1,-2.5e3,true,"é\u00e9\ud83d\ude00"],"b":{"c":null}}"#.utf8)
        for end in 0..<text.count {
            #expect(throws: JSONParseError.self, "prefix of \(end) bytes") { try JSONParser.parse(Array(text[..<end])) }
        }
    }

    struct NumberCase: CustomTestStringConvertible, Sendable {
        let lexeme: String
        let int64: Int64?
        let double: Double?
        var testDescription: String { lexeme.count > 30 ? "\(lexeme.prefix(10))… (\(lexeme.count) chars)" : lexeme }
    }

    static let numbers: [NumberCase] = [
        NumberCase(lexeme: "0", int64: 0, double: 0),
        NumberCase(lexeme: "-0", int64: 0, double: -0.0),
        NumberCase(lexeme: "3", int64: 3, double: 3),
        NumberCase(lexeme: "3.0", int64: nil, double: 3),
        NumberCase(lexeme: "1e0", int64: nil, double: 1),
        NumberCase(lexeme: "1E2", int64: nil, double: 100),
        NumberCase(lexeme: "0.8", int64: nil, double: 0.8),
        NumberCase(lexeme: "9223372036854775807", int64: .max, double: 0x1p63),
        NumberCase(lexeme: "-9223372036854775808", int64: .min, double: -0x1p63),
        NumberCase(lexeme: "9223372036854775808", int64: nil, double: 0x1p63),
        NumberCase(lexeme: "1e400", int64: nil, double: nil),
        NumberCase(lexeme: "-1e400", int64: nil, double: nil),
        NumberCase(lexeme: "1e-400", int64: nil, double: 0),
        NumberCase(lexeme: String(repeating: "9", count: 10_000), int64: nil, double: nil),
        NumberCase(lexeme: "0." + String(repeating: "1", count: 10_000), int64: nil, double: 0.1111111111111111),
    ]

    @Test(arguments: numbers)
    func numbersKeepTheirLexemeAndDeriveValuesWithoutTrapping(_ testCase: NumberCase) throws {
        let value = try JSONParser.parse(Array(testCase.lexeme.utf8))
        let number = try #require(value.numberValue)
        #expect(number.lexeme == testCase.lexeme)
        #expect(number.int64 == testCase.int64)
        #expect(number.double == testCase.double)
        if let expected = testCase.double, expected == 0 {
            #expect(number.double?.sign == expected.sign)
        }
    }

    @Test func tenMegabyteStringsParse() throws {
        let length = 10 * 1024 * 1024
        var ascii: [UInt8] = [0x22]
        ascii.append(contentsOf: repeatElement(UInt8(ascii: "a"), count: length))
        ascii.append(0x22)
        #expect(try JSONParser.parse(ascii).stringValue?.utf8.count == length)

        // Multibyte and escapes throughout: 2-byte "é" and an escaped quote every 1,000 bytes.
        var mixed: [UInt8] = [0x22]
        let chunk: [UInt8] = Array(String(repeating: "é", count: 499).utf8) + Array(#"\""#.utf8)
        for _ in 0..<(length / chunk.count) { mixed.append(contentsOf: chunk) }
        mixed.append(0x22)
        let text = try #require(try JSONParser.parse(mixed).stringValue)
        #expect(text.utf8.count == (length / chunk.count) * 999)
        #expect(text.hasSuffix("é\""))
    }

    @Test func tenThousandDigitIntegerInsideAnObject() throws {
        let digits = String(repeating: "7", count: 10_000)
        let value = try JSONParser.parse(Array(#"{"n":\#(digits)}"#.utf8))
        let number = try #require(value["n"]?.numberValue)
        #expect(number.isIntegerLexeme)
        #expect(number.int64 == nil)
        #expect(number.double == nil)
    }

    @Test func customDepthLimit() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array("[[1]]".utf8), maximumDepth: 1) }
        #expect((try? JSONParser.parse(Array("[1]".utf8), maximumDepth: 1)) != nil)
    }

    @Test func jsonNumberInitialiserChecksTheGrammar() {
        #expect(JSONNumber("12")?.int64 == 12)
        #expect(JSONNumber("012") == nil)
        #expect(JSONNumber("NaN") == nil)
        #expect(JSONNumber("\"1\"") == nil)
    }
}
