import Contract
import HTTP
import HTTPServer

/// The error type of the API: an answer that refuses a request, with one of the contract's codes
/// (whose status it takes), a message for a human, the field to blame when one is, and headers.
/// Every refusal of the product is one of these; the server renders it with `ErrorBody.api`, the
/// one writer of the contract's error body. The constructors of the answers several slices give
/// (`unauthorized`, `invalidPath`, `unavailable`, …) are here, so each is written once.
public struct APIError: HTTPResponseError, Sendable {
    public let errorCode: ErrorCode
    public let message: String
    public let field: String?
    public let headers: [(String, String)]

    public init(_ code: ErrorCode, _ message: String, field: String? = nil, headers: [(String, String)] = []) {
        self.errorCode = code
        self.message = message
        self.field = field
        self.headers = headers
    }

    /// A refusal that names the field to blame first, as decoders write it.
    public init(_ code: ErrorCode, field: String, _ message: String) {
        self.init(code, message, field: field)
    }

    public var status: HTTPStatus { HTTPStatus(code: errorCode.status) }
    public var code: String { errorCode.rawValue }

    static func unauthorized() -> APIError {
        APIError(.unauthorized, "A valid bearer token is required (Authorization: Bearer <token>).", headers: [("WWW-Authenticate", "Bearer")])
    }

    static func forbidden(_ scopes: AccessTokens.Scopes) -> APIError {
        APIError(.forbidden, "This token does not have the \(scopes.names) scope this endpoint needs.")
    }

    static func invalidPath(_ field: String) -> APIError {
        APIError(.invalidPath, "\(field) must be \(Identifier.form).", field: field)
    }

    static func unsupportedMediaType() -> APIError {
        APIError(.unsupportedMediaType, "Send Content-Type: application/json (charset, if given, utf-8).")
    }

    static func notFound(_ message: String) -> APIError {
        APIError(.notFound, message)
    }

    /// `503 unavailable` with `Retry-After`: the database (or the way to it) could not be used and
    /// nothing of the request was stored; the same request may be sent again.
    static func unavailable(_ message: String = "The database is unavailable; nothing was stored. Retry the same request.") -> APIError {
        APIError(.unavailable, message, headers: [("Retry-After", "1")])
    }

    /// `410 session_erased` (API 1.4): the session was erased and is refused for good.
    static func sessionErased(_ sessionID: String) -> APIError {
        APIError(.sessionErased, "Session \(sessionID) was erased; AdTally refuses it for good.", field: "session_id")
    }
}
