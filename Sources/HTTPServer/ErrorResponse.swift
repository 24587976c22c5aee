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

    public init(contentType: String, render: @escaping @Sendable (_ code: String, _ message: String, _ field: String?) -> [UInt8]) {
        self.contentType = contentType
        self.render = render
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

    /// The response for any thrown error: `HTTPResponseError`s as they say, anything else a generic
    /// `500 internal` (the caller logs the detail).
    public static func make(for error: any Error, format: ErrorBody) -> HTTPResponse {
        if let e = error as? any HTTPResponseError { return make(e, format: format) }
        return make(status: .internalServerError, code: "internal", message: "internal error", format: format)
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
