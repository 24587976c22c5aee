/// The contract's identifier form for `session_id`, `ad_id`, `advertiser_id` and `snapshot_id`:
/// 1 to 128 characters from `A-Z a-z 0-9 . _ : ~ -`.
///
/// The set is URL-path safe (identifiers appear in paths unescaped) and ASCII, so byte order,
/// `String` order and PostgreSQL `COLLATE "C"` order agree, and length in characters is length in
/// bytes.
public enum Identifier {
    /// The longest identifier allowed.
    public static let maximumLength = 128

    /// The form in words, for the message that refuses a value: "1 to 128 characters from ...".
    public static let form = "1 to \(maximumLength) characters from A-Z a-z 0-9 . _ : ~ -"

    /// Whether `text` is a well-formed identifier.
    public static func isWellFormed(_ text: String) -> Bool {
        var count = 0
        for byte in text.utf8 {
            count += 1
            guard count <= maximumLength, isAllowed(byte) else { return false }
        }
        return count >= 1
    }

    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "~"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}
