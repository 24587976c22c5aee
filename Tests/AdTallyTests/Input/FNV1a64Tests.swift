@testable import AdTally
import Testing

/// Reference vectors from the FNV authors' test suite (FNV-1a, 64 bit).
@Suite(.timeLimit(.minutes(3))) struct FNV1a64Tests {
    @Test(arguments: [
        ("", UInt64(0xcbf2_9ce4_8422_2325)),
        ("a", UInt64(0xaf63_dc4c_8601_ec8c)),
        ("foobar", UInt64(0x8594_4171_f739_67e8)),
    ])
    func referenceVectors(_ input: String, _ expected: UInt64) {
        #expect(FNV1a64.hash(input.utf8) == expected)
    }

    @Test func incrementalEqualsOneShot() {
        var hasher = FNV1a64()
        hasher.update("foo".utf8)
        hasher.update("bar".utf8)
        #expect(hasher.value == FNV1a64.hash("foobar".utf8))
    }
}
