/// Character classes of RFC 9110 5.6.2 and 5.5, as lookups over bytes.
enum ByteClass {
    /// `tchar`: what may appear in a method, a field name or a transfer coding.
    static func isToken(_ c: UInt8) -> Bool { tokenTable[Int(c)] }

    /// `VCHAR` (visible ASCII, no space): the characters of a request target.
    static func isVisible(_ c: UInt8) -> Bool { c > 0x20 && c < 0x7F }

    /// `field-vchar / SP / HTAB`, obs-text included: anything but NUL, CR, LF, other controls and DEL.
    static func isFieldValue(_ c: UInt8) -> Bool { c == HTAB || (c >= 0x20 && c != 0x7F) }

    private static let tokenTable: [Bool] = (0..<256).map { c in
        switch UInt8(c) {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(UInt8(c))
        }
    }
}
