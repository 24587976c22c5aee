import Dispatch

/// One serial IO queue, the connections it drives and its timer sweep. A single periodic timer per
/// queue checks every connection's deadlines, which scales to many connections where one timer
/// source per connection would not.
///
/// `@unchecked Sendable`: `connections` and `readBuffer` are only touched on `queue` (every method
/// but `init` and `start` is called there); the conformance only lets the loop be captured by
/// closures that hop onto that queue.
final class IOLoop: @unchecked Sendable {
    let queue: DispatchQueue
    private var connections: [ObjectIdentifier: Connection] = [:]
    private var timer: DispatchSourceTimer?
    /// Scratch space for `read(2)`, shared by the loop's connections so an idle connection costs no
    /// 64 KiB buffer of its own.
    var readBuffer = [UInt8](repeating: 0, count: 65536)

    init(index: Int) {
        queue = DispatchQueue(label: "http.io.\(index)", qos: .userInitiated)
    }

    func start(sweepInterval: Duration) {
        let t = DispatchSource.makeTimerSource(queue: queue)
        let ns = Int(sweepInterval.nanoseconds)
        t.schedule(deadline: .now() + .nanoseconds(ns), repeating: .nanoseconds(ns), leeway: .nanoseconds(ns / 4))
        t.setEventHandler { [weak self] in self?.sweep() }
        timer = t
        t.resume()
    }

    /// On `queue`.
    func add(_ connection: Connection) { connections[ObjectIdentifier(connection)] = connection }

    /// On `queue`.
    func remove(_ connection: Connection) { connections[ObjectIdentifier(connection)] = nil }

    /// On `queue`: closes idle connections and asks the others to close after their response.
    func beginShutdown() {
        for c in Array(connections.values) { c.beginShutdown() }
    }

    /// On `queue`: closes everything still open and stops the timer.
    func forceClose() {
        for c in Array(connections.values) { c.close() }
        timer?.cancel()
        timer = nil
    }

    private func sweep() {
        let now = monotonicNow()
        for c in Array(connections.values) { c.sweep(now: now) }
    }
}
