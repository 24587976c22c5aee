import Glibc
import JSON
import Synchronization

/// Writes one JSON object per line to standard output (`ts`, `level`, `msg`, then fields), the form
/// log collectors of container platforms parse without configuration. Lines below the configured
/// level are dropped before they are formatted.
public struct Logger: Sendable {
    /// The lowest level written.
    public let level: LogLevel
    private let sink: @Sendable (String) -> Void
    /// Standard output's writer of whole lines as bytes (several at once for a batch); nil for a
    /// logger with a line sink of its own.
    private let bytesSink: (@Sendable ([UInt8]) -> Void)?

    /// A logger writing to standard output.
    public init(level: LogLevel) {
        self.level = level
        self.sink = { line in Self.stdoutLock.withLock { _ in Self.writeToStandardOutput(Array(line.utf8)) } }
        self.bytesSink = { bytes in Self.stdoutLock.withLock { _ in Self.writeToStandardOutput(bytes) } }
    }

    /// A logger writing lines (each ending in a newline) to `sink`, for tests.
    public init(level: LogLevel, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.sink = sink
        self.bytesSink = nil
    }

    private static let stdoutLock = Mutex(())

    /// Writes the whole line with write(2). A line that cannot be written (the reader of standard
    /// output went away: `EPIPE`, the process ignoring `SIGPIPE` once it serves) is dropped: a log
    /// reader that stops must not stop the server, as `FileHandle.write` did (it traps on an error).
    static func writeToStandardOutput(_ bytes: [UInt8]) {
        var offset = 0
        bytes.withUnsafeBytes { raw in
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
        guard isEnabled(level) else { return }
        var line: [UInt8] = []
        Self.append(level, message, fields, ts: SystemClock().now().rfc3339, to: &line)
        if let bytesSink {
            bytesSink(line)
        } else {
            sink(String(decoding: line, as: UTF8.self))
        }
    }

    /// Writes several lines in order; to standard output with one `write(2)` for them all (the
    /// access log arrives in batches). Lines below the configured level are dropped.
    public func log(lines: [LogLine]) {
        guard let bytesSink else {
            for line in lines { log(line.level, line.message, line.fields) }
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(lines.count * 256)
        // One timestamp for the batch: its lines are formatted now, within microseconds of each other.
        let ts = SystemClock().now().rfc3339
        for line in lines where isEnabled(line.level) { Self.append(line.level, line.message, line.fields, ts: ts, to: &bytes) }
        if !bytes.isEmpty { bytesSink(bytes) }
    }

    /// Lines the caller formats itself (the HTTP server's access log, formatted straight from its
    /// records without a field list per request): `format` appends whole JSON lines, each ending
    /// in a newline, stamped with the `ts` it is given (one for the batch); they are written with
    /// one `write(2)`. Nothing is formatted when `level` is below the configured one.
    public func write(_ level: LogLevel, _ format: (_ ts: String, _ writer: inout JSONWriter) -> Void) {
        guard isEnabled(level) else { return }
        var writer = JSONWriter(reservingCapacity: 1024)
        format(SystemClock().now().rfc3339, &writer)
        guard !writer.bytes.isEmpty else { return }
        if let bytesSink {
            bytesSink(writer.bytes)
        } else {
            for line in writer.bytes.split(separator: UInt8(ascii: "\n")) { sink(String(decoding: line, as: UTF8.self) + "\n") }
        }
    }

    /// Whether lines at `level` are written: callers that build fields at a cost ask first.
    public func isEnabled(_ level: LogLevel) -> Bool { level >= self.level }

    /// One line as `log` writes it (tests compare the access log's own formatter with it).
    static func line(_ level: LogLevel, _ message: String, _ fields: [(String, LogValue)], ts: String) -> [UInt8] {
        var out: [UInt8] = []
        append(level, message, fields, ts: ts, to: &out)
        return out
    }

    /// Appends one JSON line, newline included.
    private static func append(_ level: LogLevel, _ message: String, _ fields: [(String, LogValue)], ts: String, to out: inout [UInt8]) {
        var writer = JSONWriter(reservingCapacity: 96 + message.utf8.count + fields.count * 32)
        writer.beginObject()
        writer.key("ts"); writer.string(ts)
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
        out.append(contentsOf: writer.bytes)
        out.append(UInt8(ascii: "\n"))
    }

    /// `log` with text fields only.
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)] = []) {
        guard isEnabled(level) else { return }
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
