import Foundation
import HTTP
@testable import HTTPServer
import JSON
@testable import Runtime
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(3))) struct AccessLogTests {
    /// The access log's own formatter writes, byte for byte, what the generic one writes for the
    /// same record's fields: successes and errors (with and without a code), text that needs
    /// escaping, long and zero durations.
    @Test func theAccessLogFormatterWritesTheGenericLines() throws {
        let records = [
            ResponseRecord(method: .get, path: "/healthz", route: "/healthz", status: 200, durationSeconds: 0.000_042_7,
                           bytes: 15, requestID: "0123456789abcdef", errorCode: nil),
            ResponseRecord(method: .post, path: "/v1/events", route: "/v1/events", status: 400, durationSeconds: 12.5,
                           bytes: 96, requestID: "r-\"quoted\"", errorCode: "invalid_json"),
            ResponseRecord(method: .put, path: "/v1/sessions/s%20\u{1}/feed", route: "/v1/sessions/{id}/feed", status: 503,
                           durationSeconds: 0, bytes: 0, requestID: "ünï", errorCode: nil),
            ResponseRecord(method: .get, path: "/x", route: "unmatched", status: 200, durationSeconds: 3.0000004,
                           bytes: 1, requestID: "id", errorCode: "ignored for a success"),
        ]
        let ts = "2026-12-01T17:00:00.123456Z"
        var writer = JSONWriter()
        for record in records { record.writeAccessLine(ts: ts, to: &writer) }
        let fast = writer.bytes
        let generic = records.flatMap { Logger.line(.info, "request", $0.accessLogFields, ts: ts) }
        #expect(String(decoding: fast, as: UTF8.self) == String(decoding: generic, as: UTF8.self))
        let lines = String(decoding: fast, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == records.count)
        let error = try #require(try JSONSerialization.jsonObject(with: Data(lines[1].utf8)) as? [String: Any])
        #expect(error["code"] as? String == "invalid_json" && error["status"] as? Int == 400 && error["request_id"] as? String == "r-\"quoted\"")
        let success = try #require(try JSONSerialization.jsonObject(with: Data(lines[3].utf8)) as? [String: Any])
        #expect(success["code"] == nil, "a success carries no error code")
        #expect(success["duration_ms"] as? Double == 3000.0)

        // Through a logger: one sink call per line, dropped below `info`.
        let written = Mutex<[String]>([])
        ResponseRecord.log(records, to: Logger(level: .info) { line in written.withLock { $0.append(line) } })
        ResponseRecord.log(records, to: Logger(level: .warning) { line in written.withLock { $0.append(line) } })
        #expect(written.withLock { $0.count } == records.count)
        #expect(written.withLock { $0.allSatisfy { $0.hasSuffix("}\n") && $0.contains(#""msg":"request""#) } })
    }
}

extension ResponseRecord {
    /// The access log line's fields: numbers as numbers, and for a `4xx` or `5xx` with an error
    /// body its `code`, so that a log query finds every `unauthorized` without reading bodies. The
    /// route pattern stands for the path, so that no identifier from a path (a session id) is logged.
    var accessLogFields: [(String, LogValue)] {
        var fields: [(String, LogValue)] = [
            ("method", .string(method?.rawValue ?? "-")), ("status", .int(status)),
            ("bytes", .int(bytes)), ("duration_ms", .double(durationMilliseconds)),
            ("route", .string(route)), ("request_id", .string(requestID)),
        ]
        if let code = logErrorCode { fields.append(("code", .string(code))) }
        return fields
    }
}
