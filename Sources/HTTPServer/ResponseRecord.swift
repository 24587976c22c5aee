import HTTP

/// One answered request, as the metrics observer and the access log see it.
public struct ResponseRecord: Sendable {
    public let method: String
    /// The path without query, as sent (still percent-encoded).
    public let path: String
    /// The matched route pattern, or `"unmatched"`.
    public let route: String
    public let status: Int
    /// From the end of the request head to the last byte of the response handed to the kernel.
    public let durationSeconds: Double
    /// Response body bytes (before chunk framing).
    public let bytes: Int
    public let requestID: String
    /// The error code of an error answer (`HTTPResponse.errorCode`), nil otherwise.
    public let errorCode: String?
}
