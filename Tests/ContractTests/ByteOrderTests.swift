@testable import Contract
import Testing

/// `String.utf8Precedes` is byte order, the order of PostgreSQL's `COLLATE "C"` keys in which rows
/// are locked and inserted; checked against the standard library's byte-by-byte comparison.
@Suite(.timeLimit(.minutes(3))) struct ByteOrderTests {
    @Test func knownPairs() {
        // Byte order, not Swift's String order: "Z" (0x5A) before "a" (0x61); a prefix first; a
        // composed "é" (C3 A9) after "e" + combining acute (65 CC 81), which String's `<` calls equal.
        #expect("Z".utf8Precedes("a"))
        #expect(!"a".utf8Precedes("Z"))
        #expect("ad-1".utf8Precedes("ad-10"))
        #expect(!"ad-10".utf8Precedes("ad-1"))
        #expect(!"same".utf8Precedes("same"))
        #expect("".utf8Precedes("x"))
        #expect(!"".utf8Precedes(""))
        #expect("e\u{301}".utf8Precedes("\u{E9}"))
        #expect(!"\u{E9}".utf8Precedes("e\u{301}"))
    }

    @Test func agreesWithTheStandardLibraryOnRandomStrings() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Character] = ["a", "b", "A", "-", "0", "é", "e\u{301}", "日", "😀", "~"]
        func random() -> String {
            // Lengths up to 40: past the 15 bytes a string stores inline, so both small and heap strings.
            String((0..<Int.random(in: 0...40, using: &generator)).map { _ in alphabet.randomElement(using: &generator) ?? "a" })
        }
        for _ in 0..<5_000 {
            let a = random(), b = Bool.random(using: &generator) ? random() : a + random()
            #expect(a.utf8Precedes(b) == a.utf8.lexicographicallyPrecedes(b.utf8), "\(a) vs \(b)")
            #expect(b.utf8Precedes(a) == b.utf8.lexicographicallyPrecedes(a.utf8), "\(b) vs \(a)")
        }
    }
}
