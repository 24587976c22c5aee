import HTTP
import HTTPServer
import Postgres

/// The contract's error answers that AdTally's handlers raise, made in one place so that codes,
/// statuses and headers cannot drift apart. The server renders any `HTTPResponseError` as
/// `{"error": {"code", "message", "field"}}`. A database that cannot be used is answered by
/// `DatabaseUnavailable`, beside the reads that meet it.
enum APIError {
    static func unauthorized() -> HTTPError {
        HTTPError(.unauthorized, code: "unauthorized", message: "A valid bearer token is required (Authorization: Bearer <token>).",
                  headers: [("WWW-Authenticate", "Bearer")])
    }

    static func forbidden(_ scopes: AccessTokens.Scopes) -> HTTPError {
        HTTPError(.forbidden, code: "forbidden", message: "This token does not have the \(scopes.names) scope this endpoint needs.")
    }

    static func invalidPath(_ field: String) -> HTTPError {
        HTTPError(.badRequest, code: "invalid_path",
                  message: "\(field) must be \(Identifier.form).", field: field)
    }

    static func unsupportedMediaType() -> HTTPError {
        HTTPError(.unsupportedMediaType, code: "unsupported_media_type",
                  message: "Send Content-Type: application/json (charset, if given, utf-8).")
    }

    static func notFound(_ message: String) -> HTTPError {
        HTTPError(.notFound, code: "not_found", message: message)
    }

    static func conflict(_ code: String, _ message: String, field: String? = nil) -> HTTPError {
        HTTPError(.conflict, code: code, message: message, field: field)
    }

    static func input(_ error: InputError) -> HTTPError {
        switch error.code {
        case .malformedJSON:
            return HTTPError(.badRequest, code: error.code.rawValue, message: error.message, field: error.field)
        case .invalidSnapshot:
            return HTTPError(.unprocessableContent, code: error.code.rawValue, message: error.message, field: error.field)
        }
    }

    /// `410 session_erased` (API 1.4): the session was erased and is refused for good.
    static func sessionErased(_ sessionID: String) -> HTTPError {
        HTTPError(HTTPStatus(code: 410), code: "session_erased",
                  message: "Session \(sessionID) was erased; AdTally refuses it for good.", field: "session_id")
    }
}
