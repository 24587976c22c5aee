/// Why a request body was refused: the `error` object of the contract's error body.
///
/// Kept free of HTTP types so the input layer stays pure; the HTTP layer maps `code` to a status
/// (`malformed_json` → 400, `invalid_snapshot` → 422).
public struct InputError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The contract's error codes that the input layer can produce.
    public enum Code: String, Sendable, Equatable {
        /// Not JSON, not an object, or (events) an `events` member that is not 1–500 entries.
        case malformedJSON = "malformed_json"
        /// A feed snapshot that is JSON but breaks a rule of section 1.
        case invalidSnapshot = "invalid_snapshot"
    }

    public let code: Code
    /// For a human: says what is wrong, never echoes large input.
    public let message: String
    /// The JSON path of the first bad member (`"ads[2].url"`), or `nil` when no one field is to blame.
    public let field: String?

    public init(code: Code, message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    static func malformedJSON(_ message: String) -> InputError {
        InputError(code: .malformedJSON, message: message)
    }

    static func invalidSnapshot(field: String, _ message: String) -> InputError {
        InputError(code: .invalidSnapshot, message: message, field: field)
    }

    public var description: String {
        "\(code.rawValue)\(field.map { name in " at \(name)" } ?? ""): \(message)"
    }
}
