import Dispatch
import Glibc

/// Severity of a log line.
public enum ServerLogLevel: Int, Sendable, Comparable, CustomStringConvertible {
    case debug, info, warning, error
    public static func < (a: ServerLogLevel, b: ServerLogLevel) -> Bool { a.rawValue < b.rawValue }
    public var description: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }
}

/// Where the server logs: a seam (after swift-log's `LogHandler`) so the product can route lines to
/// its own logger and tests can capture them. The server never calls it on an IO queue's hot path:
/// access log lines are handed over on a utility queue.
public protocol ServerLogger: Sendable {
    /// Logs a message with key/value fields; numbers stay numbers (`ServerLogValue`).
    func log(_ level: ServerLogLevel, _ message: String, _ fields: [(String, ServerLogValue)])

    /// Whether lines at `level` would be written. The server asks before building a line's fields
    /// (the access log on every request), so a logger that drops them costs nothing per request.
    /// Must be cheap and callable from any thread. Defaults to true.
    func isEnabled(_ level: ServerLogLevel) -> Bool

    /// Logs several lines at once, in order: the server hands over the access log in batches (every
    /// 20 ms under load), so a logger writing to a file can write a batch with one `write(2)` instead
    /// of one per request. Defaults to `log` for each line.
    func log(batch: [ServerLogLine])

    /// Logs the access log lines of answered requests, in order (level `info`, message `request`,
    /// the fields of `ResponseRecord.accessLogFields`). A logger that formats them itself skips the
    /// field list built per request; the default hands them to `log(batch:)` as ordinary lines.
    func logAccess(_ records: [ResponseRecord])
}

/// One line of a batch (`ServerLogger.log(batch:)`).
public struct ServerLogLine: Sendable {
    public let level: ServerLogLevel
    public let message: String
    public let fields: [(String, ServerLogValue)]

    public init(level: ServerLogLevel, message: String, fields: [(String, ServerLogValue)]) {
        self.level = level
        self.message = message
        self.fields = fields
    }
}

extension ServerLogger {
    public func isEnabled(_ level: ServerLogLevel) -> Bool { true }

    public func log(batch: [ServerLogLine]) {
        for line in batch { log(line.level, line.message, line.fields) }
    }

    public func logAccess(_ records: [ResponseRecord]) {
        log(batch: records.map { ServerLogLine(level: .info, message: "request", fields: $0.accessLogFields) })
    }
}

/// Writes `level message key=value ...` lines to stderr, one `write(2)` per line so lines from
/// several threads do not interleave.
public struct StderrLogger: ServerLogger {
    /// Lines below this level are dropped.
    public let minimumLevel: ServerLogLevel

    /// A logger that writes lines at `minimumLevel` and above.
    public init(minimumLevel: ServerLogLevel = .info) { self.minimumLevel = minimumLevel }

    public func isEnabled(_ level: ServerLogLevel) -> Bool { level >= minimumLevel }

    public func log(_ level: ServerLogLevel, _ message: String, _ fields: [(String, ServerLogValue)]) {
        guard level >= minimumLevel else { return }
        var line = "level=\(level) msg=\(Self.quoteIfNeeded(message))"
        for (k, v) in fields { line += " \(k)=\(Self.quoteIfNeeded(v.description))" }
        line += "\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }

    static func quoteIfNeeded(_ s: String) -> String {
        if !s.isEmpty, !s.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }) { return s }
        var out = "\""
        for c in s {
            switch c {
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out + "\""
    }
}

/// A logger that drops everything (tests, benchmarks).
public struct SilentLogger: ServerLogger {
    public init() {}
    public func log(_ level: ServerLogLevel, _ message: String, _ fields: [(String, ServerLogValue)]) {}
    public func isEnabled(_ level: ServerLogLevel) -> Bool { false }
}
