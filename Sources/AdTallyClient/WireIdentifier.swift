/// The contract's form for `session_id`, `ad_id` and `snapshot_id` (1 to 128 characters from
/// `A-Z a-z 0-9 . _ : ~ -`), checked at the call. The server checks the same form; the client has
/// its own copy because it must not depend on any server module. Identifiers of this form need no
/// JSON escaping, which the encoder relies on.
enum WireIdentifier {
    /// Whether `text` may be sent as an identifier.
    static func isValid(_ text: String) -> Bool {
        let utf8 = text.utf8
        guard (1...128).contains(utf8.count) else { return false }
        return utf8.allSatisfy(allowed)
    }

    private static func allowed(_ byte: UInt8) -> Bool {
        // Digits, letters, and the four punctuation marks of the form.
        (byte >= 0x30 && byte <= 0x39) || ((byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A)
            || byte == 0x2E || byte == 0x5F || byte == 0x3A || byte == 0x7E || byte == 0x2D
    }
}
