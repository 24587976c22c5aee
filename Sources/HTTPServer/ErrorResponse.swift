import HTTP

/// Renders errors as API.md's body `{"error":{"code":…,"message":…,"field":…}}`: the one place where
/// an error becomes a response.
public enum ErrorResponse {
    /// The response for an `HTTPResponseError`.
    public static func make(_ error: any HTTPResponseError) -> HTTPResponse {
        make(status: error.status, code: error.code, message: error.message, field: error.field, headers: error.headers)
    }

    /// The response for any thrown error: `HTTPResponseError`s as they say, anything else a generic
    /// `500 internal` (the caller logs the detail).
    public static func make(for error: any Error) -> HTTPResponse {
        if let e = error as? any HTTPResponseError { return make(e) }
        return make(status: .internalServerError, code: "internal", message: "internal error")
    }

    /// The response for a status, code, message and optional field and headers.
    public static func make(status: HTTPStatus, code: String, message: String, field: String? = nil,
                            headers: [(String, String)] = []) -> HTTPResponse {
        var h = HTTPHeaders(headers)
        h.replaceOrAdd(name: "Content-Type", value: "application/json")
        var response = HTTPResponse(status: status, headers: h, body: Array(body(code: code, message: message, field: field).utf8))
        response.errorCode = code
        return response
    }

    /// The JSON text of an error body; `field` is omitted when nil.
    public static func body(code: String, message: String, field: String? = nil) -> String {
        var s = "{\"error\":{\"code\":\(JSONString.quote(code)),\"message\":\(JSONString.quote(message))"
        if let field { s += ",\"field\":\(JSONString.quote(field))" }
        s += "}}"
        return s
    }
}
