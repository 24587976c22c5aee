import HTTP

/// How the server writes the body of an error answer: the ones it makes itself (`404`, `405`, the
/// parser's `400`/`413`/`414`/`431`/`505`, `408`, `503` past `maxConnections`) and those of handlers
/// that throw. The server is generic: the product hands its own format over in
/// `ServerConfiguration.errorBody` (AdTally: API.md's JSON body); the default is one line of text.
public struct ErrorBody: Sendable {
    /// The `Content-Type` of the body.
    public let contentType: String
    /// The body for an error code, a message and optionally the field to blame.
    public let render: @Sendable (_ code: String, _ message: String, _ field: String?) -> [UInt8]
    /// What an error that is not an `HTTPResponseError` means, when the product knows (a database
    /// that cannot be used: `503`); nil for an error it does not expect (`500`, logged).
    public let meaning: @Sendable (any Error) -> (any HTTPResponseError)?

    public init(contentType: String, render: @escaping @Sendable (_ code: String, _ message: String, _ field: String?) -> [UInt8],
                meaning: @escaping @Sendable (any Error) -> (any HTTPResponseError)? = { _ in nil }) {
        self.contentType = contentType
        self.render = render
        self.meaning = meaning
    }

    /// The answer to a thrown error, and whether it was unexpected (neither an `HTTPResponseError`
    /// nor one the product gives a meaning: a generic `500` whose detail only the log gets).
    public func answer(_ error: any Error) -> (response: HTTPResponse, unexpected: Bool) {
        if let known = error as? any HTTPResponseError { return (ErrorResponse.make(known, format: self), false) }
        if let meant = meaning(error) { return (ErrorResponse.make(meant, format: self), false) }
        return (ErrorResponse.make(status: ServerRefusal.internal.status, code: ServerRefusal.internal.code, message: "internal error", format: self), true)
    }

    /// `code: message` (and ` (field)`) and a newline, as `text/plain`.
    public static let plainText = ErrorBody(contentType: "text/plain; charset=utf-8") { code, message, field in
        Array("\(code): \(message)\(field.map { name in " (\(name))" } ?? "")\n".utf8)
    }
}

/// The one place where an error becomes a response, in the format an `ErrorBody` gives.
public enum ErrorResponse {
    /// The response for an `HTTPResponseError`.
    public static func make(_ error: any HTTPResponseError, format: ErrorBody) -> HTTPResponse {
        make(status: error.status, code: error.code, message: error.message, field: error.field, headers: error.headers, format: format)
    }

    /// The response for any thrown error: `HTTPResponseError`s as they say, what the product gives
    /// a meaning as it says, anything else a generic `500 internal` (the caller logs the detail).
    public static func make(for error: any Error, format: ErrorBody) -> HTTPResponse {
        format.answer(error).response
    }

    /// The response for a status, code, message and optional field and headers.
    public static func make(status: HTTPStatus, code: String, message: String, field: String? = nil,
                            headers: [(String, String)] = [], format: ErrorBody) -> HTTPResponse {
        var h = HTTPHeaders(headers)
        h.replaceOrAdd(name: "Content-Type", value: format.contentType)
        var response = HTTPResponse(status: status, headers: h, body: format.render(code, message, field))
        response.errorCode = code
        return response
    }
}
