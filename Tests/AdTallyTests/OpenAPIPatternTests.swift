import AdTally
import Contract
import Foundation
import Testing

/// The checks docs/openapi.yaml writes as JSON Schema patterns must be the server's own: a pattern
/// looser than the server makes generated "valid" requests fail (Schemathesis then warns that the
/// API rejects most generated data), a stricter one documents refusals that do not happen. Each
/// pattern is compared with the server's check on hand-picked and generated strings.
@Suite(.timeLimit(.minutes(3))) struct OpenAPIPatternTests {
    /// The `pattern` of the schema at `path` (keys from `components:` down, one per indentation
    /// level of two spaces), unquoted as YAML reads it.
    static func pattern(_ path: [String]) throws -> String {
        let text = try String(contentsOf: OpenAPIRouteTests.root.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        for (depth, key) in (["components", "schemas"] + path).enumerated() {
            let prefix = String(repeating: " ", count: 2 * depth) + key + ":"
            guard let index = lines.firstIndex(where: { $0.hasPrefix(prefix) }) else {
                throw PatternNotFound(description: "no \(prefix) in docs/openapi.yaml")
            }
            lines = lines[(index + 1)...]
        }
        let prefix = String(repeating: " ", count: 2 * (path.count + 2)) + "pattern: "
        let block = lines.prefix(while: { $0.isEmpty || $0.hasPrefix(String(repeating: " ", count: 2 * (path.count + 2))) })
        guard let line = block.first(where: { $0.hasPrefix(prefix) }) else {
            throw PatternNotFound(description: "no pattern under \(path.joined(separator: "."))")
        }
        let quoted = line.dropFirst(prefix.count)
        if quoted.hasPrefix("'"), quoted.hasSuffix("'") {
            return String(quoted.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'")
        }
        if quoted.hasPrefix("\""), quoted.hasSuffix("\"") {
            return String(quoted.dropFirst().dropLast()).replacingOccurrences(of: "\\\\", with: "\\")
        }
        return String(quoted)
    }

    struct PatternNotFound: Error, CustomStringConvertible {
        let description: String
    }

    /// Whether the pattern matches `text` as JSON Schema's ECMA-262 reading does. ICU's `$` also
    /// matches before a final line feed, so the match must cover the whole text.
    static func matches(_ pattern: NSRegularExpression, _ text: String) -> Bool {
        let whole = NSRange(text.startIndex..., in: text)
        return pattern.firstMatch(in: text, range: whole)?.range == whole
    }

    /// Deterministic pseudo-random strings (a 64-bit LCG), so that a failure reproduces.
    struct Strings {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
        mutating func string(from alphabet: [Character], maximumLength: Int) -> String {
            String((0..<next(maximumLength + 1)).map { _ in alphabet[next(alphabet.count)] })
        }
    }

    static let urlCases = [
        "https://acme.example/landing?c=9", "HTTPS://0", "hTtPs://%AB#", "https://a:00080/", "https://a:65535",
        "https://[::1]:8443/x", "https://[2001:db8::1]", "https://a?x@y", "https://a#@b", "https://x.example/a b",
        "https://a:0/", "https://a:65536", "https://a:/", "https://a:x", "https://@x", "https://bank.example@evil.example/",
        "https://[1.2.3.4]/", "https://[::1]x", "https://[::1", "https://h<", "https://%zz", "https://", "https:/a",
        "http://a", "tel:123", "javascript:alert(1)", "https://a\\b", "https://ä.example/", "https://a/ü", "",
    ]

    @Test func urlPatternAgreesWithLandingURL() throws {
        let pattern = try NSRegularExpression(pattern: Self.pattern(["Ad", "properties", "url"]))
        var cases = Self.urlCases
        var strings = Strings(state: 20261129)
        let alphabet = Array("aZ09.-_~%:@[]/?#!$&'()*+,;=\\<> \"é") + ["\u{7F}", "\t"]
        for _ in 0..<20_000 {
            let scheme = ["https://", "HTTPS://", "https:", "http://", ""][strings.next(5)]
            cases.append(scheme + strings.string(from: alphabet, maximumLength: 24))
        }
        // maxLength 2048 sits beside the pattern in the schema; these cases are all shorter.
        let disagreements = cases.filter { Self.matches(pattern, $0) != LandingURL.isAcceptable($0) }
        #expect(disagreements.isEmpty, "\(disagreements.count) disagreements, such as \(disagreements.prefix(10).map { "\($0.debugDescription) (server: \(LandingURL.isAcceptable($0)))" })")
        #expect(LandingURL.isAcceptable("https://a/" + String(repeating: "p", count: 2038)))
        #expect(!LandingURL.isAcceptable("https://a/" + String(repeating: "p", count: 2039)), "over maxLength 2048")
    }

    @Test func identifierPatternAgreesWithIdentifier() throws {
        let pattern = try NSRegularExpression(pattern: Self.pattern(["Identifier"]))
        var cases = ["sess-9f2", "a", "A.b_c:d~e-f", String(repeating: "x", count: 128), String(repeating: "x", count: 129),
                     "", "a/b", "a b", "a%2Fb", "é", "a\n"]
        var strings = Strings(state: 42)
        let alphabet = Array("aZ09._:~-/ %é+")
        for _ in 0..<5_000 { cases.append(strings.string(from: alphabet, maximumLength: 8)) }
        let disagreements = cases.filter { Self.matches(pattern, $0) != Identifier.isWellFormed($0) }
        #expect(disagreements.isEmpty, "\(disagreements.count) disagreements, such as \(disagreements.prefix(10).map(\.debugDescription))")
    }
}
