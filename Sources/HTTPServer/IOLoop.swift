import CEpoll
import Dispatch
import Glibc
import Timestamps

/// One serial IO queue, the connections it drives and its timer sweep.
///
/// The loop's connections sit in an epoll set of its own (level-triggered), and one Dispatch read
/// source on that set's fd wakes the queue when any of them is ready; its handler takes every ready
/// connection from one `epoll_wait(…, 0)`. A Dispatch source per connection cost, on Linux, two
/// `epoll_ctl`, an `ioctl(FIONREAD)` and two wake-ups of Dispatch's manager thread per request
/// (perf and strace under wrk, docs/ARCHITECTURE.md); here a request costs its `read` and its `send`,
/// and the wake-up is shared by the connections that became ready together. Write interest is added
/// only when a `send` meets `EAGAIN`.
///
/// A single periodic timer per queue checks every connection's deadlines, which scales to many
/// connections where one timer source per connection would not.
///
/// `@unchecked Sendable`: `connections`, `readBuffer` and `events` are only touched on `queue`
/// (every method but `init`, `start` and `deinit` is called there); the conformance only lets the
/// loop be captured by closures that hop onto that queue.
final class IOLoop: @unchecked Sendable {
    let queue: DispatchQueue
    private let epollFD: Int32
    private var connections: [Int32: Connection] = [:]
    private var timer: DispatchSourceTimer?
    private var readySource: DispatchSourceRead?
    private let events: UnsafeMutablePointer<epoll_event>
    private static let maxEvents: Int32 = 256
    /// Scratch space for `read(2)`, shared by the loop's connections so an idle connection costs no
    /// 64 KiB buffer of its own.
    var readBuffer = [UInt8](repeating: 0, count: 65536)

    /// What a connection wants to hear about.
    struct Interest: Equatable {
        var read: Bool
        var write: Bool

        var mask: UInt32 { (read ? EPOLLIN.rawValue : 0) | (write ? EPOLLOUT.rawValue : 0) }
    }

    init(label: String) {
        queue = DispatchQueue(label: label, qos: .userInitiated)
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        events = .allocate(capacity: Int(Self.maxEvents))
    }

    deinit {
        events.deallocate()
        // Without a started source (a server never started) nobody else closes the set.
        if readySource == nil, epollFD >= 0 { Glibc.close(epollFD) }
    }

    /// Whether the epoll set exists (it can only fail for lack of file descriptors or memory).
    var isUsable: Bool { epollFD >= 0 }

    func start(sweepInterval: Duration) {
        let t = DispatchSource.makeTimerSource(queue: queue)
        let ns = Int(clamping: sweepInterval.nanoseconds)
        t.schedule(deadline: .now() + .nanoseconds(ns), repeating: .nanoseconds(ns), leeway: .nanoseconds(ns / 4))
        t.setEventHandler { [weak self] in self?.sweep() }
        timer = t
        t.resume()
        let fd = epollFD
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler { [weak self] in self?.poll() }
        source.setCancelHandler { Glibc.close(fd) }
        readySource = source
        source.resume()
    }

    /// On `queue`: adds a connection to the set; false when the kernel refuses (the caller closes it).
    func add(_ connection: Connection, fd: Int32, interest: Interest) -> Bool {
        var event = epoll_event()
        event.events = interest.mask
        event.data.fd = fd
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else { return false }
        connections[fd] = connection
        return true
    }

    /// On `queue`: changes what the connection is woken for.
    func update(fd: Int32, interest: Interest) {
        var event = epoll_event()
        event.events = interest.mask
        event.data.fd = fd
        _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    /// On `queue`: takes the connection out of the set, before its fd is closed (so that a reused
    /// fd number can never be mistaken for it).
    func remove(fd: Int32) {
        if connections.removeValue(forKey: fd) != nil {
            var event = epoll_event()
            _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event)
        }
    }

    /// On `queue`: every connection ready now, each told what it is ready for. Under load more
    /// connections are ready by the time a batch is handled; taking them in the same turn (a few
    /// rounds at most, so that replies from worker threads and the sweep queued behind are not held
    /// up) saves a wake-up of the queue through Dispatch for each.
    private func poll() {
        for _ in 0..<Self.roundsPerWakeUp {
            let n = epoll_wait(epollFD, events, Self.maxEvents, 0)
            guard n > 0 else { return }
            handle(Int(n))
        }
    }

    private static let roundsPerWakeUp = 4

    private func handle(_ n: Int) {
        for i in 0..<n {
            let event = events[i]
            let fd = event.data.fd
            // A connection closed earlier in this batch is gone from the table (and from the set).
            guard let connection = connections[fd] else { continue }
            connection.ready(readable: event.events & EPOLLIN.rawValue != 0, writable: event.events & EPOLLOUT.rawValue != 0,
                             hangUp: event.events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0)
        }
    }

    /// On `queue`: closes idle connections and asks the others to close after their response.
    func beginShutdown() {
        for c in Array(connections.values) { c.beginShutdown() }
    }

    /// On `queue`: closes everything still open and stops the timer and the set.
    func forceClose() {
        for c in Array(connections.values) { c.close() }
        timer?.cancel()
        timer = nil
        readySource?.cancel()
    }

    private func sweep() {
        let now = monotonicNow()
        for c in Array(connections.values) { c.sweep(now: now) }
    }
}
