import HTTPServer

/// Sends the HTTP server's log lines (access log, errors) to AdTally's JSON logger.
struct ServerLogAdapter: ServerLogger {
    let logger: Logger

    func isEnabled(_ level: ServerLogLevel) -> Bool { Self.map(level) >= logger.level }

    func log(_ level: ServerLogLevel, _ message: String, _ fields: [(String, ServerLogValue)]) {
        logger.log(Self.map(level), message, fields.map { ($0.0, LogValue($0.1)) })
    }

    func log(batch: [ServerLogLine]) {
        logger.log(lines: batch.map { (level: Self.map($0.level), message: $0.message, fields: $0.fields.map { ($0.0, LogValue($0.1)) }) })
    }

    func logAccess(_ records: [ResponseRecord]) {
        logger.logAccess(records)
    }

    static func map(_ level: ServerLogLevel) -> AdTally.LogLevel {
        let mapped: AdTally.LogLevel
        switch level {
        case .debug: mapped = .debug
        case .info: mapped = .info
        case .warning: mapped = .warning
        default: mapped = .error
        }
        return mapped
    }
}
