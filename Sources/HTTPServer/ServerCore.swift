import Dispatch
import HTTP
import Synchronization

/// What every connection of one server shares: configuration, router, worker pool, seams and
/// counters. Immutable but for atomics, so it is `Sendable` without exceptions.
final class ServerCore: Sendable {
    let configuration: ServerConfiguration
    let parser: HTTPRequestParser
    let router: Router
    let workers: WorkerPool
    let observer: (any HTTPServerObserver)?
    let logger: any ServerLogger
    /// Access log lines and observer-free logging leave the IO queues through here.
    let logQueue = DispatchQueue(label: "http.log", qos: .utility)
    /// Connections counted against `maxConnections` (rejected ones are not).
    let openConnections = Atomic<Int>(0)
    let shuttingDown = Atomic<Bool>(false)
    /// Signalled when the last connection closes during shutdown.
    let drained = DispatchSemaphore(value: 0)

    init(configuration: ServerConfiguration, router: Router, observer: (any HTTPServerObserver)?, logger: any ServerLogger) {
        self.configuration = configuration
        self.parser = HTTPRequestParser(limits: configuration.limits)
        self.router = router
        self.workers = WorkerPool(maxThreads: configuration.maxWorkerThreads)
        self.observer = observer
        self.logger = logger
    }

    var isShuttingDown: Bool { shuttingDown.load(ordering: .acquiring) }

    func connectionClosed() {
        let remaining = openConnections.subtract(1, ordering: .acquiringAndReleasing).newValue
        if remaining == 0, isShuttingDown { drained.signal() }
    }

    /// Lines waiting for the log queue. Batched so that a busy server pays one queue hop per batch,
    /// not one per request.
    private let pendingLines = Mutex<[LogLine]>([])

    struct LogLine: Sendable {
        let level: ServerLogLevel
        let message: String
        let fields: [(String, String)]
    }

    func log(_ level: ServerLogLevel, _ message: String, _ fields: [(String, String)]) {
        let wasEmpty = pendingLines.withLock { lines -> Bool in
            lines.append(LogLine(level: level, message: message, fields: fields))
            return lines.count == 1
        }
        guard wasEmpty else { return }
        let logger = self.logger
        logQueue.async { [self] in
            let lines = pendingLines.withLock { lines -> [LogLine] in
                defer { lines = [] }
                return lines
            }
            for line in lines { logger.log(line.level, line.message, line.fields) }
        }
    }
}
