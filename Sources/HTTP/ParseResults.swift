/// The answer of `HTTPRequestParser.parseHead`.
public enum HeadParseResult: Sendable {
    /// The head is complete and occupied the first `consumed` bytes; the body (if any) follows.
    case complete(HTTPRequestHead, consumed: Int)
    /// More bytes are needed; nothing is wrong so far.
    case incomplete
    /// The bytes can never become an acceptable head.
    case invalid(HTTPParseError)
}

/// The answer of a body step (`ChunkedBodyDecoder.decode`, `HTTPRequestParser.parseBody`).
public enum BodyParseResult: Sendable {
    /// The body is complete: its decoded bytes, and how many raw bytes it occupied.
    case complete([UInt8], consumed: Int)
    /// More bytes are needed.
    case incomplete
    /// The body is malformed (`400`) or over the limit (`413`).
    case invalid(HTTPParseError)
}

/// The answer of `HTTPRequestParser.parse`, head and body in one step.
public enum RequestParseResult: Sendable {
    /// A whole request occupied the first `consumed` bytes.
    case complete(HTTPRequest, consumed: Int)
    /// More bytes are needed.
    case incomplete
    /// The bytes can never become an acceptable request.
    case invalid(HTTPParseError)
}
