/// Why the parser refused a request. The kind maps to the status and API.md error code; the reason is a
/// short human text for logs and tests.
public struct HTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The refusal classes of API.md, in the order that decides which wins when several apply.
    public enum Kind: Sendable, Equatable, CaseIterable {
        /// Syntax or smuggling shape: `400 bad_request`.
        case badRequest
        /// Target longer than the limit: `414 uri_too_long`.
        case uriTooLong
        /// Head too large or too many fields: `431 headers_too_large`.
        case headersTooLarge
        /// Version other than 1.0 and 1.1: `505 http_version_not_supported`.
        case versionNotSupported
        /// Body over the limit: `413 payload_too_large`.
        case payloadTooLarge
    }

    public let kind: Kind
    /// What exactly was wrong, for the log (never trusted for control flow).
    public let reason: String

    /// An error of a kind with a reason.
    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    /// The status to answer with.
    public var status: HTTPStatus { kind.status }

    /// The API.md error code.
    public var code: String { kind.code }

    public var description: String { "\(status.code) \(code): \(reason)" }
}

extension HTTPParseError.Kind {
    /// The status a refusal of this kind is answered with.
    public var status: HTTPStatus {
        switch self {
        case .badRequest: .badRequest
        case .uriTooLong: .uriTooLong
        case .headersTooLarge: .headersTooLarge
        case .versionNotSupported: .httpVersionNotSupported
        case .payloadTooLarge: .payloadTooLarge
        }
    }

    /// The API.md error code of this kind.
    public var code: String {
        switch self {
        case .badRequest: "bad_request"
        case .uriTooLong: "uri_too_long"
        case .headersTooLarge: "headers_too_large"
        case .versionNotSupported: "http_version_not_supported"
        case .payloadTooLarge: "payload_too_large"
        }
    }
}
