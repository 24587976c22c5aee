import Foundation
import Glibc
import HTTPServer
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
            Self.stdoutLock.withLock { _ in Self.writeToStandardOutput(line) }
        }
    }

    /// A logger writing lines (each ending in a newline) to `sink`, for tests.
    public init(level: LogLevel, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.sink = sink
    }

    private static let stdoutLock = Mutex(())

    /// Writes the whole line with write(2). A line that cannot be written (the reader of standard
    /// output went away: `EPIPE`, the process ignoring `SIGPIPE` once it serves) is dropped: a log
    /// reader that stops must not stop the server, as `FileHandle.write` did (it traps on an error).
    static func writeToStandardOutput(_ line: String) {
        var offset = 0
        Array(line.utf8).withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            while offset < raw.count {
                let written = Glibc.write(STDOUT_FILENO, base + offset, raw.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// Writes `message` with `fields` when `level` is at or above the configured one. A number
    /// field is written as a JSON number, so that log queries can compare it.
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, LogValue)]) {
        guard level >= self.level else { return }
        var writer = JSONWriter(reservingCapacity: 96 + message.utf8.count + fields.count * 32)
        writer.beginObject()
        writer.key("ts"); writer.string(SystemClock().now().rfc3339)
        writer.key("level"); writer.string(level.rawValue)
        writer.key("msg"); writer.string(message)
        for (key, value) in fields {
            writer.key(key)
            switch value {
            case .string(let text): writer.string(text)
            case .int(let number): writer.int(number)
            case .double(let number) where number.isFinite: writer.double(number)
            case .double(let number): writer.string(number.description)
            }
        }
        writer.endObject()
        var line = writer.bytes
        line.append(UInt8(ascii: "\n"))
        sink(String(decoding: line, as: UTF8.self))
    }

    /// `log` with text fields only.
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        guard level >= self.level else { return }
        log(level, message, fields.map { ($0.0, LogValue.string($0.1)) })
    }

    public func debug(_ message: String, _ fields: [(String, String)] = []) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [(String, String)] = []) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [(String, String)] = []) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [(String, String)] = []) { log(.error, message, fields) }
    public func debug(_ message: String, _ fields: [(String, LogValue)]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [(String, LogValue)]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [(String, LogValue)]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [(String, LogValue)]) { log(.error, message, fields) }
}
