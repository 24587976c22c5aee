import HTTP

/// One answered request, as the metrics observer and the access log see it.
public struct ResponseRecord: Sendable {
    public let method: String
    /// The path without query, as sent (still percent-encoded). Not in the access log: a path holds
    /// identifiers (`/v1/sessions/{session_id}/feed`); `route` says which endpoint it was.
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

    public init(method: String, path: String, route: String, status: Int, durationSeconds: Double, bytes: Int,
                requestID: String, errorCode: String?) {
        self.method = method
        self.path = path
        self.route = route
        self.status = status
        self.durationSeconds = durationSeconds
        self.bytes = bytes
        self.requestID = requestID
        self.errorCode = errorCode
    }
}

extension ResponseRecord {
    /// The access log line's fields: numbers as numbers, and for a `4xx` or `5xx` with an error
    /// body its `code`, so that a log query finds every `unauthorized` without reading bodies. The
    /// route pattern stands for the path, so that no identifier from a path (a session id) is logged.
    public var accessLogFields: [(String, ServerLogValue)] {
        var fields: [(String, ServerLogValue)] = [
            ("method", .string(method)), ("status", .int(status)),
            ("bytes", .int(bytes)), ("duration_ms", .double(durationMilliseconds)),
            ("route", .string(route)), ("request_id", .string(requestID)),
        ]
        if let code = logErrorCode { fields.append(("code", .string(code))) }
        return fields
    }

    /// The error code the access log shows: an error answer's, nil for a success.
    public var logErrorCode: String? { status >= 400 ? errorCode : nil }

    /// The duration in milliseconds rounded down to the microsecond (`0.042`, `12.5`, `3.0`): a
    /// finer digit would only be the clock's noise.
    public var durationMilliseconds: Double {
        (durationSeconds * 1_000_000).rounded(.down) / 1000
    }
}
