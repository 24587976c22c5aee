import Foundation
@testable import Runtime
import Synchronization
import Testing
import Timestamps

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
}
