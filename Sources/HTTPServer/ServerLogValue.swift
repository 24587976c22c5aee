/// The value of a log field: text, or a number that a JSON logger writes as a JSON number, so that
/// a log query can compare (`status >= 500`, `duration_ms > 100`) without casting strings first.
public enum ServerLogValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, CustomStringConvertible {
    case string(String)
    case int(Int)
    /// A finite number; a logger writes a non-finite one as text, since JSON has no such number.
    case double(Double)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }

    /// The value as plain text (`200`, `0.027`, `GET`), for loggers that write text.
    public var description: String {
        switch self {
        case .string(let text): text
        case .int(let number): String(number)
        case .double(let number): number.description
        }
    }
}
