@testable import Contract
import Testing

@Suite(.timeLimit(.minutes(3))) struct IdentifierTests {
    @Test(arguments: ["a", "sess-9f2", "ad-42", "feed-2026-11-29-0001", "AZaz09._:~-", String(repeating: "x", count: 128)])
    func accepts(_ text: String) {
        #expect(Identifier.isWellFormed(text))
    }

    @Test(arguments: ["", String(repeating: "x", count: 129), "a b", "a/b", "a%2Fb", "é", "a\u{0}", "a+b",
                      "a@b", "a\"b", "ａ", "a\n", "a,b", "a#b", "a?b"])
    func refuses(_ text: String) {
        #expect(!Identifier.isWellFormed(text))
    }
}
