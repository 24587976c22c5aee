/// Percent-decoding of path segments and query components (RFC 3986 section 2.1).
public enum PercentDecoding {
    /// Decodes `%XX` escapes (and `+` as a space when asked, for query strings). Returns nil when a
    /// `%` is not followed by two hex digits: malformed encoding is a client error (`400`), not
    /// something to guess about.
    public static func decode(_ bytes: some Collection<UInt8>, plusAsSpace: Bool) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var it = bytes.makeIterator()
        while let byte = it.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                out.append(hv << 4 | lv)
            case UInt8(ascii: "+") where plusAsSpace:
                out.append(UInt8(ascii: " "))
            default:
                out.append(byte)
            }
        }
        return out
    }

    /// Decodes one path segment into a string. Nil only for malformed percent-encoding (`%zz`),
    /// which is `400 bad_request`. Well-formed escapes of bytes that are not UTF-8 (`%ff`) are
    /// decoded with U+FFFD in their place: API.md makes such a segment a routing and validation
    /// matter (no literal matches it: `404`; an identifier parameter is out of form: `invalid_path`
    /// after auth), not an HTTP syntax error.
    public static func decodePathSegment(_ bytes: some Collection<UInt8>) -> String? {
        guard let decoded = decode(bytes, plusAsSpace: false) else { return nil }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// The value of one hex digit, or nil.
    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
