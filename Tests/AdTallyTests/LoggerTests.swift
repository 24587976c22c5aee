@testable import AdTally
import HTTPServer
import Foundation
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(3))) struct LoggerTests {
    @Test func linesAreJSONWithEscapedValuesAndLevelsFiltered() throws {
        let lines = Mutex<[String]>([])
        let logger = Logger(level: .info) { line in lines.withLock { $0.append(line) } }
        logger.debug("dropped")
        logger.info("quote \" backslash \\ newline \n tab \t bell \u{7}", [("key", "ünïcode ✓"), ("empty", "")])
        logger.error("kept")
        let written = lines.withLock { $0 }
        #expect(written.count == 2)
        #expect(written.allSatisfy { $0.hasSuffix("\n") && $0.dropLast().contains("\n") == false })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written[0].utf8)) as? [String: Any])
        #expect(object["msg"] as? String == "quote \" backslash \\ newline \n tab \t bell \u{7}")
        #expect(object["level"] as? String == "info")
        #expect(object["key"] as? String == "ünïcode ✓")
        #expect(object["empty"] as? String == "")
        let ts = try #require(object["ts"] as? String)
        #expect(Timestamp(rfc3339: ts) != nil && ts.hasSuffix("Z"))
    }

    /// Numbers are JSON numbers (`"status":200`), so that log queries compare them without casts;
    /// text that looks like a number stays text.
    @Test func numberFieldsAreJSONNumbers() throws {
        let lines = Mutex<[String]>([])
        let logger = Logger(level: .info) { line in lines.withLock { $0.append(line) } }
        logger.info("request", [("status", .int(404)), ("duration_ms", .double(0.027)), ("text", .string("200")),
                                ("nan", .double(.nan))])
        let line = try #require(lines.withLock { $0.first })
        #expect(line.contains(#""status":404,"#), "\(line)")
        #expect(line.contains(#""duration_ms":0.027,"#), "\(line)")
        #expect(line.contains(#""text":"200""#), "\(line)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
        #expect(object["nan"] as? String == "nan", "a non-finite number is written as text, keeping the line valid JSON")
    }

    /// The access log's own formatter writes, byte for byte, what the generic one writes for the
    /// same record's fields: successes and errors (with and without a code), text that needs
    /// escaping, long and zero durations.
    @Test func theAccessLogFormatterWritesTheGenericLines() throws {
        let records = [
            ResponseRecord(method: "GET", path: "/healthz", route: "/healthz", status: 200, durationSeconds: 0.000_042_7,
                           bytes: 15, requestID: "0123456789abcdef", errorCode: nil),
            ResponseRecord(method: "POST", path: "/v1/events", route: "/v1/events", status: 400, durationSeconds: 12.5,
                           bytes: 96, requestID: "r-\"quoted\"", errorCode: "invalid_json"),
            ResponseRecord(method: "PUT", path: "/v1/sessions/s%20\u{1}/feed", route: "/v1/sessions/{id}/feed", status: 503,
                           durationSeconds: 0, bytes: 0, requestID: "ünï", errorCode: nil),
            ResponseRecord(method: "GET", path: "/x", route: "unmatched", status: 200, durationSeconds: 3.0000004,
                           bytes: 1, requestID: "id", errorCode: "ignored for a success"),
        ]
        let ts = "2026-12-01T17:00:00.123456Z"
        let fast = Logger.accessLines(records, ts: ts)
        let generic = records.flatMap { Logger.line(.info, "request", $0.accessLogFields.map { ($0.0, LogValue($0.1)) }, ts: ts) }
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
        Logger(level: .info) { line in written.withLock { $0.append(line) } }.logAccess(records)
        Logger(level: .warning) { line in written.withLock { $0.append(line) } }.logAccess(records)
        #expect(written.withLock { $0.count } == records.count)
        #expect(written.withLock { $0.allSatisfy { $0.hasSuffix("}\n") && $0.contains(#""msg":"request""#) } })
    }
}
