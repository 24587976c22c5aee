/// The contract's rule for an ad's landing `url`: an absolute `https` URL with a host.
///
/// An ad server that hands out `tel:`, `http:`, `javascript:` or another app's scheme makes a tap
/// dial a number, leak over cleartext or run script; the rule keeps only web pages over TLS.
/// Checked on the raw text (RFC 3986 syntax), with these decisions:
/// - at most 2,048 bytes, every byte printable ASCII `!`…`~`: no space, control character, DEL or
///   non-ASCII byte anywhere (IDN hosts must be punycode, other characters percent-encoded);
/// - scheme `https` in any case, followed by `//` and an authority ending at the first `/`, `?` or `#`;
/// - no user info: an `@` anywhere in the authority is refused (`https://bank.example@evil.example/`);
/// - the host is non-empty and is either a bracketed IP literal (`[2001:db8::1]`) or an RFC 3986
///   reg-name: letters, digits, `-._~!$&'()*+,;=` and well-formed `%HH`; a `\` or other character
///   that browsers would treat as a delimiter is refused;
/// - a port, if the authority has a `:` after the host, must be 1 to 5 digits with a value
///   1…65535 (an empty port or port 0 is refused: neither can be opened);
/// - path, query and fragment are not checked beyond the byte rule above (a fragment is allowed).
public enum LandingURL {
    /// The longest URL accepted, in bytes.
    public static let maximumLength = 2048

    /// Whether `text` is an acceptable landing URL.
    public static func isAcceptable(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count <= maximumLength else { return false }
        for byte in bytes where byte <= 0x20 || byte >= 0x7F { return false }

        let prefix = Array("https://".utf8)
        guard bytes.count > prefix.count else { return false }
        for offset in 0..<prefix.count {
            var byte = bytes[offset]
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { byte += 0x20 }
            guard byte == prefix[offset] else { return false }
        }

        var authorityEnd = prefix.count
        while authorityEnd < bytes.count {
            let byte = bytes[authorityEnd]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            authorityEnd += 1
        }
        let authority = bytes[prefix.count..<authorityEnd]
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else { return false }

        let host: ArraySlice<UInt8>
        let port: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return false }
            let literal = authority[(authority.startIndex + 1)..<close]
            guard isIPLiteral(literal) else { return false }
            host = authority[authority.startIndex...close]
            let rest = authority[(close + 1)...]
            if rest.isEmpty {
                port = nil
            } else {
                guard rest.first == UInt8(ascii: ":") else { return false }
                port = rest.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            host = authority[..<colon]
            port = authority[(colon + 1)...]
            guard isRegName(host) else { return false }
        } else {
            host = authority
            port = nil
            guard isRegName(host) else { return false }
        }
        guard !host.isEmpty else { return false }
        if let port, !isPort(port) { return false }
        return true
    }

    static func isRegName(_ host: ArraySlice<UInt8>) -> Bool {
        guard !host.isEmpty else { return false }
        var index = host.startIndex
        while index < host.endIndex {
            let byte = host[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < host.endIndex, isHexDigit(host[index + 1]), isHexDigit(host[index + 2])
                else { return false }
                index += 3
                continue
            }
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
                 UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"),
                 UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
                 UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
                index += 1
            default:
                return false
            }
        }
        return true
    }

    /// A loose check of the inside of `[...]`: hex digits, `:` and `.` (IPv6, IPv4-mapped), at least
    /// one `:`. Full IPv6 grammar is not needed to keep the authority unambiguous.
    static func isIPLiteral(_ literal: ArraySlice<UInt8>) -> Bool {
        guard literal.contains(UInt8(ascii: ":")) else { return false }
        return literal.allSatisfy { isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
    }

    static func isPort(_ port: ArraySlice<UInt8>) -> Bool {
        guard (1...5).contains(port.count) else { return false }
        var value = 0
        for byte in port {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return false }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value >= 1 && value <= 65_535
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
             UInt8(ascii: "A")...UInt8(ascii: "F"):
            return true
        default:
            return false
        }
    }
}
