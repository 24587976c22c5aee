/// The value of a log field: text, or a number that the logger writes as a JSON number, so that a
/// log query can compare (`status >= 500`, `hours_folded > 0`) without casting strings first. The
/// one vocabulary of every part that logs, the HTTP server's included.
public enum LogValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, CustomStringConvertible {
    case string(String)
    case int(Int)
    /// A finite number; a non-finite one is written as text, since JSON has no such number.
    case double(Double)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }

    /// The value as plain text (`200`, `0.027`, `GET`).
    public var description: String {
        switch self {
        case .string(let text): text
        case .int(let number): String(number)
        case .double(let number): number.description
        }
    }
}

/// One line of a batch (`Logger.log(lines:)`).
public struct LogLine: Sendable {
    public let level: LogLevel
    public let message: String
    public let fields: [(String, LogValue)]

    public init(level: LogLevel, message: String, fields: [(String, LogValue)]) {
        self.level = level
        self.message = message
        self.fields = fields
    }
}
