import Foundation
import Synchronization

/// Writes one JSON object per line to standard output (`ts`, `level`, `msg`, then fields), the form
/// log collectors of container platforms parse without configuration. Lines below the configured
/// level are dropped before they are formatted.
public struct Logger: Sendable {
    /// The lowest level written.
    public let level: LogLevel
    private let sink: @Sendable (String) -> Void

    /// A logger writing to standard output.
    public init(level: LogLevel) {
        self.init(level: level) { line in
            Self.stdoutLock.withLock { _ in
                FileHandle.standardOutput.write(Data(line.utf8))
            }
        }
    }

    /// A logger writing lines (each ending in a newline) to `sink`, for tests.
    public init(level: LogLevel, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.sink = sink
    }

    private static let stdoutLock = Mutex(())

    /// Writes `message` with `fields` when `level` is at or above the configured one.
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        guard level >= self.level else { return }
        var line = "{\"ts\":\"\(Self.timestamp())\",\"level\":\"\(level.rawValue)\",\"msg\":"
        Self.appendQuoted(message, to: &line)
        for (key, value) in fields {
            line.append(",")
            Self.appendQuoted(key, to: &line)
            line.append(":")
            Self.appendQuoted(value, to: &line)
        }
        line.append("}\n")
        sink(line)
    }

    public func debug(_ message: String, _ fields: [(String, String)] = []) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [(String, String)] = []) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [(String, String)] = []) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [(String, String)] = []) { log(.error, message, fields) }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = time_t(now.tv_sec)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, Int(now.tv_nsec / 1_000_000))
    }

    static func appendQuoted(_ text: String, to line: inout String) {
        line.append("\"")
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": line.append("\\\"")
            case "\\": line.append("\\\\")
            case "\n": line.append("\\n")
            case "\r": line.append("\\r")
            case "\t": line.append("\\t")
            case _ where scalar.value < 0x20:
                line.append(String(format: "\\u%04x", scalar.value))
            default:
                line.unicodeScalars.append(scalar)
            }
        }
        line.append("\"")
    }
}
