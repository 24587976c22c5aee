import HTTPServer

extension ErrorBody {
    /// API.md's error body, `{"error":{"code":…,"message":…,"field":…}}` (`field` omitted when nil),
    /// handed to the HTTP server through the router so that every error answer has it: the server's
    /// own (`404`, `405`, `408`, `413`, `431`, `503`, …) as well as those of handlers that throw.
    static let api = ErrorBody(contentType: "application/json") { code, message, field in
        Array(APIErrorBody.text(code: code, message: message, field: field).utf8)
    }
}

enum APIErrorBody {
    /// The JSON text of an error body; `field` is omitted when nil.
    static func text(code: String, message: String, field: String? = nil) -> String {
        var s = "{\"error\":{\"code\":\(JSONString.quote(code)),\"message\":\(JSONString.quote(message))"
        if let field { s += ",\"field\":\(JSONString.quote(field))" }
        s += "}}"
        return s
    }
}
