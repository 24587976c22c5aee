import HTTPServer

/// The value of a log field: text, or a number that the logger writes as a JSON number, so that a
/// log query can compare (`hours_folded > 0`) without casting strings first. AdTally's own, so that
/// the parts that log (maintenance, the stores) need not import the HTTP server; the server's lines
/// arrive in its `ServerLogValue` and are converted once (`init(_:)`).
public enum LogValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case string(String)
    case int(Int)
    /// A finite number; a non-finite one is written as text, since JSON has no such number.
    case double(Double)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }

    /// A field of the HTTP server's lines.
    init(_ value: ServerLogValue) {
        switch value {
        case .string(let text): self = .string(text)
        case .int(let number): self = .int(number)
        case .double(let number): self = .double(number)
        }
    }
}
