import HTTP

/// The refusals the server answers on its own, before or around a product's handler, each with its
/// code and status; with the parser's (`HTTPParseError.Kind`), every error answer that is not the
/// product's (`everyCode`), so that a product can check its own list of codes covers them.
public enum ServerRefusal: String, Sendable, CaseIterable {
    /// No route matches the path.
    case notFound = "not_found"
    /// The path matches, the method does not (with `Allow`).
    case methodNotAllowed = "method_not_allowed"
    /// The head did not arrive within its time.
    case requestTimeout = "request_timeout"
    /// Over the server's connections, or a body that waited too long for room.
    case unavailable
    /// An error no answer was meant for.
    case `internal`
    /// A limit per client (`ClientLimits`).
    case rateLimited = "rate_limited"

    public var code: String { rawValue }

    public var status: HTTPStatus {
        switch self {
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .requestTimeout: .requestTimeout
        case .unavailable: .serviceUnavailable
        case .internal: .internalServerError
        case .rateLimited: HTTPStatus(code: 429)
        }
    }

    /// Every code the server and its parser answer with on their own, with its status.
    public static var everyCode: [(code: String, status: Int)] {
        HTTPParseError.Kind.allCases.map { ($0.code, $0.status.code) } + allCases.map { ($0.code, $0.status.code) }
    }
}
