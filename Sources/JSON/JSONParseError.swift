/// Why a body is not JSON, and where: the message of a `malformed_json` answer is built from it.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong; tests match on it, humans read `description`.
    public enum Reason: Sendable, Equatable {
        case empty
        case unexpectedEnd
        case unexpectedByte(UInt8)
        case byteOrderMark
        case invalidUTF8
        case controlCharacterInString
        case invalidEscape
        case loneSurrogate
        case invalidNumber
        case tooDeep(limit: Int)
        case trailingData
    }

    public let reason: Reason
    /// Byte offset into the body where the problem was found.
    public let offset: Int

    public var description: String {
        switch reason {
        case .empty: return "the body is empty"
        case .unexpectedEnd: return "the JSON text ends too early (at byte \(offset))"
        case .unexpectedByte(let byte):
            if byte >= 0x20 && byte < 0x7F {
                return "unexpected character '\(Character(Unicode.Scalar(byte)))' at byte \(offset)"
            }
            return "unexpected byte 0x\(String(byte, radix: 16, uppercase: true)) at byte \(offset)"
        case .byteOrderMark: return "a byte order mark is not allowed before the JSON text"
        case .invalidUTF8: return "invalid UTF-8 at byte \(offset)"
        case .controlCharacterInString: return "unescaped control character in a string at byte \(offset)"
        case .invalidEscape: return "invalid escape sequence in a string at byte \(offset)"
        case .loneSurrogate: return "unpaired UTF-16 surrogate in a \\u escape at byte \(offset)"
        case .invalidNumber: return "invalid number at byte \(offset)"
        case .tooDeep(let limit): return "arrays and objects nested deeper than \(limit) levels at byte \(offset)"
        case .trailingData: return "unexpected data after the JSON value at byte \(offset)"
        }
    }
}
