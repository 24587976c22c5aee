import Foundation
@testable import Runtime
import Testing

/// SHA-256 against FIPS 180-4's examples, HMAC-SHA-256 against RFC 4231's test cases, base64url
/// against RFC 4648's: the digests that stand in for advertiser keys and the MAC of `session_ref`
/// are the standard's, not merely self-consistent.
@Suite(.timeLimit(.minutes(3))) struct SHA256Tests {
    static func bytes(hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return result
    }

    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
        ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
    ])
    func digestsAreTheStandardsExamples(message: String, digest: String) {
        #expect(SHA256.hash(message.utf8).hex == digest)
        #expect(SHA256.hash(message.utf8).bytes == Self.bytes(hex: digest))
    }

    @Test func aMillionAsFedInPiecesOfEveryLength() {
        var hasher = SHA256()
        var fed = 0, piece = 1
        while fed < 1_000_000 {
            let count = min(piece, 1_000_000 - fed)
            hasher.update(repeatElement(UInt8(ascii: "a"), count: count))
            fed += count
            piece = piece % 130 + 1
        }
        #expect(hasher.finalize().hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func lengthsAroundABlockBoundaryDifferAndRoundTripThroughHex() {
        var seen = Set<SHA256.Digest>()
        for length in 50...70 {
            let digest = SHA256.hash(repeatElement(UInt8(0x61), count: length))
            #expect(seen.insert(digest).inserted, "length \(length) collided")
            #expect(SHA256.Digest(hex: digest.hex) == digest)
            #expect(SHA256.Digest(hex: digest.hex.uppercased()) == digest)
            #expect(SHA256.Digest(bytes: digest.bytes) == digest)
        }
        #expect(SHA256.Digest(hex: "00") == nil)
        #expect(SHA256.Digest(hex: String(repeating: "g", count: 64)) == nil)
        #expect(SHA256.Digest(bytes: [UInt8](repeating: 0, count: 31)) == nil)
    }

    @Test(arguments: [
        // RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (5 truncates the output, which no caller does).
        ("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        ("4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", String(repeating: "dd", count: 50),
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        ("0102030405060708090a0b0c0d0e0f10111213141516171819", String(repeating: "cd", count: 50),
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        (String(repeating: "aa", count: 131), "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        (String(repeating: "aa", count: 131),
         "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ])
    func hmacIsRFC4231s(key: String, data: String, code: String) {
        #expect(HMACSHA256(key: Self.bytes(hex: key)).code(Self.bytes(hex: data)).hex == code)
    }

    @Test func base64URLIsRFC4648sWithoutPadding() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors { #expect(Base64URL.encode(Array(plain.utf8)) == encoded) }
        // The two characters where base64url differs from base64 ('+' and '/').
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        // Against Foundation's base64 for random lengths, translated to the URL alphabet.
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255) }
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
        }
        #expect(Base64URL.encode([UInt8](repeating: 0, count: 32)).count == 43)
    }
}
