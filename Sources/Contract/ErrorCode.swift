/// Every error code the service answers (docs/API.md, "Conventions"), each with its one status:
/// the `code` of `{"error": {"code", "message", "field"}}`. The HTTP server writes its own refusals
/// with the same codes (`bad_request` … `http_version_not_supported`, `not_found`,
/// `method_not_allowed`, `unavailable`, `internal`); a test holds `docs/openapi.yaml`'s list to this
/// one, so no code can be answered that the documentation does not name.
public enum ErrorCode: String, Sendable, CaseIterable {
    /// HTTP syntax, smuggling shapes, malformed percent-encoding.
    case badRequest = "bad_request"
    case malformedJSON = "malformed_json"
    /// An identifier in the path out of form.
    case invalidPath = "invalid_path"
    case invalidQuery = "invalid_query"
    case invalidAdjustment = "invalid_adjustment"
    /// The body of `POST /v1/advertisers/{id}/keys` out of form (API 1.5).
    case invalidKeyRequest = "invalid_key_request"
    case unauthorized
    /// A known credential without the endpoint's scope.
    case forbidden
    case notFound = "not_found"
    case methodNotAllowed = "method_not_allowed"
    case requestTimeout = "request_timeout"
    case snapshotConflict = "snapshot_conflict"
    case snapshotSuperseded = "snapshot_superseded"
    case adAdvertiserConflict = "ad_advertiser_conflict"
    case adjustmentConflict = "adjustment_conflict"
    /// A 21st active key for one advertiser (API 1.5).
    case tooManyKeys = "too_many_keys"
    /// A session erased and refused for good (API 1.4).
    case sessionErased = "session_erased"
    case payloadTooLarge = "payload_too_large"
    case uriTooLong = "uri_too_long"
    case unsupportedMediaType = "unsupported_media_type"
    case invalidSnapshot = "invalid_snapshot"
    case rateLimited = "rate_limited"
    case headersTooLarge = "headers_too_large"
    /// Never on purpose: an error no answer was meant for.
    case `internal`
    /// The database (or the queue to it) could not be used; nothing was stored.
    case unavailable
    case httpVersionNotSupported = "http_version_not_supported"

    /// The status every answer with this code has.
    public var status: Int {
        switch self {
        case .badRequest, .malformedJSON, .invalidPath, .invalidQuery, .invalidAdjustment, .invalidKeyRequest: 400
        case .unauthorized: 401
        case .forbidden: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .requestTimeout: 408
        case .snapshotConflict, .snapshotSuperseded, .adAdvertiserConflict, .adjustmentConflict, .tooManyKeys: 409
        case .sessionErased: 410
        case .payloadTooLarge: 413
        case .uriTooLong: 414
        case .unsupportedMediaType: 415
        case .invalidSnapshot: 422
        case .rateLimited: 429
        case .headersTooLarge: 431
        case .internal: 500
        case .unavailable: 503
        case .httpVersionNotSupported: 505
        }
    }
}
