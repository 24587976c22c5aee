/// Base64url without padding (RFC 4648 section 5), the alphabet of secrets that travel in headers
/// and URLs: `A-Z a-z 0-9 - _`.
public enum Base64URL {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `bytes` in base64url, without `=` padding: 4 characters for each 3 bytes, rounded up.
    public static func encode(_ bytes: [UInt8]) -> String {
        var text: [UInt8] = []
        text.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let group = b0 << 16 | b1 << 8 | b2
            let characters = min(4, (bytes.count - index) * 4 / 3 + ((bytes.count - index) < 3 ? 1 : 0))
            for position in 0..<characters {
                text.append(alphabet[Int((group >> UInt32(18 - 6 * position)) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: text, as: UTF8.self)
    }
}
