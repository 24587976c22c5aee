/// The contract's `event_id`: a UUID in canonical text form (8-4-4-4-12 hex digits, any case),
/// stored and echoed lowercase.
///
/// Only the form is checked, not the RFC 9562 version or variant bits: clients generate ids with
/// whatever library their platform has, and the id only has to be unique, not of a given version.
public enum EventID {
    /// The lowercase form of `text` when it is a canonical UUID; `nil` otherwise (braces, `urn:uuid:`,
    /// missing hyphens, surrounding whitespace are all refused).
    public static func canonical(_ text: String) -> String? {
        var output: [UInt8] = []
        output.reserveCapacity(36)
        var position = 0
        for byte in text.utf8 {
            guard position < 36 else { return nil }
            if position == 8 || position == 13 || position == 18 || position == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
                output.append(byte)
            } else {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"):
                    output.append(byte)
                case UInt8(ascii: "A")...UInt8(ascii: "F"):
                    output.append(byte + 0x20)
                default:
                    return nil
                }
            }
            position += 1
        }
        guard position == 36 else { return nil }
        return String(decoding: output, as: UTF8.self)
    }
}
