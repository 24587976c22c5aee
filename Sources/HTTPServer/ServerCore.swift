import Dispatch
import Glibc
import HTTP
import Runtime
import Synchronization

/// What every connection of one server shares: configuration, router, worker pool, seams and
/// counters. Immutable but for atomics, so it is `Sendable` without exceptions.
final class ServerCore: Sendable {
    let configuration: ServerConfiguration
    let parser: HTTPRequestParser
    /// The configuration's timeouts in the form the connections' state machine takes.
    let timeouts: ConnectionState.Timeouts
    let router: Router
    let workers: WorkerPool
    let observer: (any HTTPServerObserver)?
    let logger: Logger
    /// Access log lines and observer-free logging leave the IO queues through here.
    let logQueue = DispatchQueue(label: "http.log", qos: .utility)
    /// Connections counted against `maxConnections` (rejected ones are not).
    let openConnections = Atomic<Int>(0)
    let shuttingDown = Atomic<Bool>(false)
    /// Signalled when the last connection closes during shutdown.
    let drained = DispatchSemaphore(value: 0)
    /// Open connections per peer (`maxConnectionsPerPeer`).
    let peerConnections = PeerConnections()
    /// Request bodies held in memory by all connections (`maxBufferedBodyBytes`).
    let bodyBudget: BodyBudget
    /// Log lines dropped because the logger could not keep up (`maxPendingLogLines`).
    let droppedLogLines = Atomic<Int>(0)
    /// Where connections' descriptors are closed: `close(2)` of a TCP socket sends its FIN, on
    /// loopback through the peer's stack, inline (tens of microseconds); a sweep that closes
    /// hundreds at once (idle connections, a peer's connections over its cap) would hold its IO
    /// queue, and every other connection of it, for tens of milliseconds.
    private let closer = DispatchQueue(label: "http.close", qos: .utility)

    init(configuration: ServerConfiguration, router: Router, observer: (any HTTPServerObserver)?, logger: Logger) {
        self.configuration = configuration
        self.bodyBudget = BodyBudget(limit: configuration.maxBufferedBodyBytes)
        self.parser = HTTPRequestParser(limits: configuration.limits)
        self.timeouts = ConnectionState.Timeouts(configuration)
        self.router = router
        self.workers = WorkerPool(maxThreads: configuration.maxWorkerThreads)
        self.observer = observer
        self.logger = logger
    }

    var isShuttingDown: Bool { shuttingDown.load(ordering: .acquiring) }

    /// Closes a connection's descriptor off the IO queue. The connection has left its epoll set:
    /// nothing uses the descriptor any more, and its number cannot be reused before this runs.
    func closeDescriptor(_ fd: Int32) {
        closer.async { _ = Glibc.close(fd) }
    }

    func connectionClosed() {
        let remaining = openConnections.subtract(1, ordering: .acquiringAndReleasing).newValue
        if remaining == 0, isShuttingDown { drained.signal() }
    }

    /// Lines waiting for the log queue, whether a drain is scheduled, and how many lines were dropped
    /// since the last drain. Batched so that a busy server pays one queue hop per batch, not one per
    /// request; bounded (`maxPendingLogLines`), so that a logger stuck in `write(2)` (standard output
    /// blocked) costs dropped lines, counted, never memory without bound.
    private let pending = Mutex<(lines: [PendingLine], scheduled: Bool, dropped: Int)>(([], false, 0))

    /// A line waiting for the log queue: an access log line stays a record until the logger
    /// formats it (no field list per request).
    private enum PendingLine: Sendable {
        case line(LogLine)
        case access(ResponseRecord)
    }

    /// How long access-log lines may wait for their batch: long enough that a busy server wakes the
    /// log queue a few dozen times a second rather than once per few requests.
    static let accessLogDelay = DispatchTimeInterval.milliseconds(20)

    /// Hands a line to the logger on the log queue. `deferred` lines (the access log) may wait up to
    /// `accessLogDelay` so that many share one wake-up of the log queue; others are drained at once
    /// (unless a drain is already scheduled, which they join).
    func log(_ level: LogLevel, _ message: String, _ fields: [(String, LogValue)], deferred: Bool = false) {
        enqueue(.line(LogLine(level: level, message: message, fields: fields)), deferred: deferred)
    }

    /// Hands an access log line to the logger on the log queue, deferred (see `log`).
    func logAccess(_ record: ResponseRecord) {
        enqueue(.access(record), deferred: true)
    }

    private func enqueue(_ line: PendingLine, deferred: Bool) {
        let limit = configuration.maxPendingLogLines
        let schedule = pending.withLock { p -> Bool in
            guard p.lines.count < limit else {
                p.dropped += 1
                droppedLogLines.add(1, ordering: .relaxed)
                return false
            }
            p.lines.append(line)
            if p.scheduled { return false }
            p.scheduled = true
            return true
        }
        guard schedule else { return }
        if deferred {
            logQueue.asyncAfter(deadline: .now() + Self.accessLogDelay) { [self] in drainLogs() }
        } else {
            logQueue.async { [self] in drainLogs() }
        }
    }

    /// Writes every pending line now and waits for it (shutdown).
    func flushLogs() {
        logQueue.sync { drainLogs() }
    }

    /// On `logQueue`.
    private func drainLogs() {
        var (lines, dropped) = pending.withLock { p -> ([PendingLine], Int) in
            defer { p = ([], false, 0) }
            return (p.lines, p.dropped)
        }
        if dropped > 0 {
            // Said once per drain that found drops, after the lines that were kept.
            lines.append(.line(LogLine(level: .warning, message: "log lines dropped: the log could not be written fast enough",
                                             fields: [("dropped", .int(dropped))])))
        }
        // In order: each run of access lines, and each run of other lines, as one batch.
        var access: [ResponseRecord] = []
        var others: [LogLine] = []
        for line in lines {
            switch line {
            case .access(let record):
                if !others.isEmpty { logger.log(lines: others); others = [] }
                access.append(record)
            case .line(let other):
                if !access.isEmpty { ResponseRecord.log(access, to: logger); access = [] }
                others.append(other)
            }
        }
        if !others.isEmpty { logger.log(lines: others) }
        if !access.isEmpty { ResponseRecord.log(access, to: logger) }
    }
}
