import Dispatch
import Synchronization

/// Log lines that must not be written on the thread that has them (an IO queue: standard output
/// may block): they wait, at most `capacity` of them, for a utility queue that writes them; beyond,
/// they are counted and said in one line when the queue gets to write again.
public final class LogOutbox: Sendable {
    private let logger: Logger
    private let capacity: Int
    private let queue = DispatchQueue(label: "adtally.log-outbox", qos: .utility)
    private let pending = Mutex<(lines: [(String, [(String, LogValue)])], scheduled: Bool, dropped: Int)>(([], false, 0))

    public init(logger: Logger, capacity: Int = 1_000) {
        self.logger = logger
        self.capacity = capacity
    }

    /// Queues a warning; never blocks.
    public func warning(_ message: String, _ fields: [(String, LogValue)]) {
        let schedule = pending.withLock { p -> Bool in
            guard p.lines.count < capacity else {
                p.dropped += 1
                return false
            }
            p.lines.append((message, fields))
            defer { p.scheduled = true }
            return !p.scheduled
        }
        guard schedule else { return }
        queue.async { [self] in
            let (lines, dropped) = pending.withLock { p -> ([(String, [(String, LogValue)])], Int) in
                defer { p = ([], false, 0) }
                return (p.lines, p.dropped)
            }
            for (message, fields) in lines { logger.warning(message, fields) }
            if dropped > 0 { logger.warning("warnings dropped: the log could not be written fast enough", [("dropped", .int(dropped))]) }
        }
    }

    /// Waits until every queued line is written (tests).
    public func flush() { queue.sync {} }
}
