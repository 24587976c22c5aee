import HTTP
import JSON
import Runtime

/// One answered request, as the metrics observer and the access log see it.
public struct ResponseRecord: Sendable {
    /// Nil when no request line could be read.
    public let method: HTTPMethod?
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
    /// The handler's observation of the answer (`HTTPResponse.observation`); not logged.
    public let observation: (any Sendable)?

    public init(method: HTTPMethod?, path: String, route: String, status: Int, durationSeconds: Double, bytes: Int,
                requestID: String, errorCode: String?, observation: (any Sendable)? = nil) {
        self.method = method
        self.path = path
        self.route = route
        self.status = status
        self.durationSeconds = durationSeconds
        self.bytes = bytes
        self.requestID = requestID
        self.errorCode = errorCode
        self.observation = observation
    }
}

extension ResponseRecord {
    /// Writes the access log lines of `records` (level `info`, message `request`), formatted
    /// straight from the records into one buffer and written with one `write(2)`: the lines
    /// `logger.log(.info, "request", record.accessLogFields)` would write, without a field list per
    /// request.
    static func log(_ records: [ResponseRecord], to logger: Logger) {
        guard !records.isEmpty else { return }
        logger.write(.info) { ts, writer in
            for record in records { record.writeAccessLine(ts: ts, to: &writer) }
        }
    }

    /// One access log line, stamped `ts`, newline included.
    func writeAccessLine(ts: String, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("ts"); writer.string(ts)
        writer.key("level"); writer.string(LogLevel.info.rawValue)
        writer.key("msg"); writer.string("request")
        writer.key("method"); writer.string(method?.rawValue ?? "-")
        writer.key("status"); writer.int(status)
        writer.key("bytes"); writer.int(bytes)
        writer.key("duration_ms"); writer.double(durationMilliseconds)
        writer.key("route"); writer.string(route)
        writer.key("request_id"); writer.string(requestID)
        if let code = logErrorCode { writer.key("code"); writer.string(code) }
        writer.endObject()
        writer.endLine()
    }

    /// The error code the access log shows: an error answer's, nil for a success.
    public var logErrorCode: String? { status >= 400 ? errorCode : nil }

    /// The duration in milliseconds rounded down to the microsecond (`0.042`, `12.5`, `3.0`): a
    /// finer digit would only be the clock's noise.
    public var durationMilliseconds: Double {
        (durationSeconds * 1_000_000).rounded(.down) / 1000
    }
}
