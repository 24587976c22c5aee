import HTTP

/// An error a handler throws to answer with a particular status and API.md error body. Errors become
/// statuses in exactly one place (the server's `ErrorResponse`), after Hummingbird's
/// `HTTPResponseError`; any other error is a `500 internal` whose detail only goes to the log.
public protocol HTTPResponseError: Error {
    /// The response status.
    var status: HTTPStatus { get }
    /// The API.md error code (`invalid_query`, `unauthorized`, ...).
    var code: String { get }
    /// A message for a human reading the response.
    var message: String { get }
    /// The field, path segment or query parameter to blame, if one is.
    var field: String? { get }
    /// Extra response headers (`Retry-After`, `WWW-Authenticate`, `Allow`).
    var headers: [(String, String)] { get }
}

extension HTTPResponseError {
    public var field: String? { nil }
    public var headers: [(String, String)] { [] }
}

/// A ready-made `HTTPResponseError` for handlers that need no error type of their own.
public struct HTTPError: HTTPResponseError, Sendable {
    public let status: HTTPStatus
    public let code: String
    public let message: String
    public let field: String?
    public let headers: [(String, String)]

    /// An error answered as `status` with this code, message and optional field and headers.
    public init(_ status: HTTPStatus, code: String, message: String, field: String? = nil, headers: [(String, String)] = []) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers
    }
}
