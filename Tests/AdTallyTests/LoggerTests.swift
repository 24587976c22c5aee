import AdTally
import Foundation
import Synchronization
import Testing

@Suite struct LoggerTests {
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
}
