import Foundation
@testable import JSON
import Testing
import Timestamps

@Suite(.timeLimit(.minutes(3))) struct JSONWriterTests {
    func text(_ build: (inout JSONWriter) -> Void) -> String {
        var writer = JSONWriter()
        build(&writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    @Test func writesTheContractsErrorBodyShape() {
        let body = text { w in
            w.beginObject()
            w.key("error")
            w.beginObject()
            w.key("code"); w.string("invalid_snapshot")
            w.key("message"); w.string("ads[2].url must be https")
            w.key("field"); w.string("ads[2].url")
            w.endObject()
            w.endObject()
        }
        #expect(body == #"{"error":{"code":"invalid_snapshot","message":"ads[2].url must be https","field":"ads[2].url"}}"#)
    }

    @Test func separatesArrayElementsAndNestedContainers() {
        let body = text { w in
            w.beginArray()
            w.int(1); w.bool(true); w.bool(false); w.null()
            w.beginArray(); w.endArray()
            w.beginObject(); w.endObject()
            w.beginObject(); w.key("a"); w.beginArray(); w.int(-2); w.endArray(); w.key("b"); w.string(nil as String?); w.endObject()
            w.endArray()
        }
        #expect(body == #"[1,true,false,null,[],{},{"a":[-2],"b":null}]"#)
    }

    struct EscapeCase: CustomTestStringConvertible, Sendable {
        let name: String
        let input: String
        let expected: String
        var testDescription: String { name }
    }

    static let escapes: [EscapeCase] = [
        EscapeCase(name: "quote and backslash", input: "a\"b\\c", expected: #""a\"b\\c""#),
        EscapeCase(name: "short control escapes", input: "\n\r\t\u{8}\u{C}", expected: #""\n\r\t\b\f""#),
        EscapeCase(name: "other control characters as \\u00XX", input: "\u{0}\u{1}\u{1F}", expected: #""\u0000\u0001\u001f""#),
        EscapeCase(name: "slash and DEL are not escaped", input: "/\u{7F}", expected: "\"/\u{7F}\""),
        EscapeCase(name: "non-ASCII written as UTF-8", input: "é€😀", expected: "\"é€😀\""),
        EscapeCase(name: "empty string", input: "", expected: #""""#),
    ]

    @Test(arguments: escapes)
    func escapesStrings(_ testCase: EscapeCase) throws {
        let body = text { $0.string(testCase.input) }
        #expect(body == testCase.expected)
        // And reads back as the same string with the strict parser.
        #expect(try JSONParser.parse(Array(body.utf8)) == .string(testCase.input))
    }

    @Test(arguments: [0.025, 0.1, 0.30000000000000004, 1.0, 0.0, -0.0, 1e-7, 1e20, 1e300, Double.leastNonzeroMagnitude,
                      1.7976931348623157e308, 123456.789, -2.5])
    func doublesRoundTripShortest(_ value: Double) throws {
        let body = text { $0.double(value) }
        // Valid JSON per the strict parser and per Foundation, and reads back to the same bits.
        let parsed = try #require(try JSONParser.parse(Array(body.utf8)).numberValue?.double)
        #expect(parsed.bitPattern == value.bitPattern)
        #expect(try JSONSerialization.jsonObject(with: Data(body.utf8), options: .fragmentsAllowed) is NSNumber)
        #expect(!body.contains("inf") && !body.contains("nan"))
    }

    @Test func shortestFormsOfWellKnownValues() {
        #expect(text { $0.double(0.025) } == "0.025")
        #expect(text { $0.double(0.1) } == "0.1")
        #expect(text { $0.double(0.1 + 0.2) } == "0.30000000000000004")
    }

    @Test(arguments: [Double.infinity, -Double.infinity, Double.nan])
    func nonFiniteDoublesBecomeNull(_ value: Double) {
        #expect(text { w in w.beginArray(); w.double(value); w.int(1); w.endArray() } == "[null,1]")
    }

    @Test func integersAtTheLimits() {
        #expect(text { w in w.beginArray(); w.int(Int64.min); w.int(Int64.max); w.int(Int32(0)); w.int(UInt64.max); w.endArray() }
                == "[-9223372036854775808,9223372036854775807,0,18446744073709551615]")
    }

    @Test func serializesParsedValuesDeterministically() throws {
        let source = #"{"b":[1,2.50,"x"],"a":{"z":null,"y":true},"é":-0}"#
        let value = try JSONParser.parse(Array(source.utf8))
        var writer = JSONWriter()
        writer.value(value)
        let written = writer.bytes
        #expect(String(decoding: written, as: UTF8.self) == #"{"a":{"y":true,"z":null},"b":[1,2.50,"x"],"é":-0}"#)
        #expect(try JSONParser.parse(written) == value)
    }
}

@Suite(.timeLimit(.minutes(3))) struct JSONWriterTimestampTests {
    @Test func timestampsAndNull() {
        var writer = JSONWriter()
        writer.beginArray()
        writer.timestamp(Timestamp(microsecondsSinceEpoch: 1_795_960_020_250_999))
        writer.timestamp(nil)
        writer.endArray()
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #"["2026-11-29T13:47:00.250Z",null]"#)
    }
}
