/// A JSON number exactly as it was written.
///
/// Request bodies may carry `1e400` or a 10,000-digit integer; converting eagerly would either trap
/// or round silently. Keeping the lexeme lets each field decide what it accepts: `position` wants an
/// exact integer (`3.0` is not one), `visible_fraction` wants any finite number.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number's text, valid RFC 8259 number grammar (ASCII).
    public let lexeme: String
    /// Whether the lexeme has neither a fraction nor an exponent: the contract's "JSON integer".
    public let isIntegerLexeme: Bool

    /// Builds a number from a lexeme the parser has already checked against the grammar.
    init(validatedLexeme lexeme: String, isIntegerLexeme: Bool) {
        self.lexeme = lexeme
        self.isIntegerLexeme = isIntegerLexeme
    }

    /// Builds a number from text, checking the RFC 8259 grammar; `nil` when it is not a JSON number.
    public init?(_ text: String) {
        guard case .number(let number)? = try? JSONParser.parse(Array(text.utf8)) else { return nil }
        self = number
    }

    /// The value when it is a JSON integer (no fraction, no exponent) that fits `Int64`; else `nil`.
    /// `-0` is `0`. Computed on demand: most numbers in a body are read at most once.
    public var int64: Int64? {
        guard isIntegerLexeme else { return nil }
        return Int64(lexeme)
    }

    /// The value as a finite `Double` (nearest, as `strtod` rounds); `nil` when it overflows to
    /// infinity (`1e400`). Underflow gives `0` (or `-0`), which is the nearest value.
    public var double: Double? {
        guard let value = Double(lexeme), value.isFinite else { return nil }
        return value
    }

    public var description: String { lexeme }
}
