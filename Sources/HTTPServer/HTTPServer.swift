import Dispatch
import Glibc
import HTTP
import Runtime
import Synchronization
import Timestamps

/// The HTTP/1.1 server: a non-blocking listener, connections driven by `DispatchSource`s on a few
/// serial IO queues, handlers on a worker pool, and a graceful shutdown (after
/// swift-service-lifecycle: graceful first, forced after a deadline).
///
/// Use: `let server = HTTPServer(configuration:router:)`, `try server.start()`, read `boundPort`,
/// then `server.waitUntilStopped()` on the main thread while `shutdown(gracePeriod:)` is called from
/// elsewhere (in AdTally, by its `ServiceGroup` on a signal).
public final class HTTPServer: Sendable {
    private enum Phase {
        case created
        case running(listener: ListenerHandle, port: Int)
        case stopping
        case stopped
    }

    private let core: ServerCore
    /// The IO queues that serve connections within their caps, each a share of them in turn.
    private let loops: [IOLoop]
    /// The IO queue of the connections accepted over a cap (their peer's, or the server's): each is
    /// answered one request (`429` or `503`, or a probe served) and closed, and a client that opens
    /// them by the thousand (hundreds of accepts and closes a second, each a sweep's work when it
    /// idles out) does all of it here, off the queues that serve everyone else.
    private let overflowLoop: IOLoop
    private let acceptQueue = DispatchQueue(label: "http.accept", qos: .userInitiated)
    private let phase = Mutex<Phase>(.created)
    private let nextLoop = Atomic<Int>(0)
    /// Whether the listener is paused for want of file descriptors, and when that was last logged.
    private let acceptPause = Mutex(AcceptPause())
    /// Left once when the server has fully stopped; `wait` on it to block until then.
    private let stoppedGroup = DispatchGroup()

    /// A server that will route requests with `router`. `observer` is told about every response
    /// (metrics); `logger` receives the access log and errors.
    public init(configuration: ServerConfiguration = ServerConfiguration(), router: Router,
                observer: (any HTTPServerObserver)? = nil, logger: Logger = Logger(level: .info)) {
        core = ServerCore(configuration: configuration, router: router, observer: observer, logger: logger)
        loops = (0..<max(1, configuration.ioQueueCount)).map { IOLoop(label: "http.io.\($0)") }
        overflowLoop = IOLoop(label: "http.io.overflow")
        stoppedGroup.enter()
    }

    /// The configuration the server runs with.
    public var configuration: ServerConfiguration { core.configuration }

    /// Connections currently open (the `adtally_http_connections_open` gauge).
    public var openConnections: Int { core.openConnections.load(ordering: .relaxed) }

    /// Bytes of request bodies held in memory now (`maxBufferedBodyBytes`).
    public var bufferedBodyBytes: Int { core.bodyBudget.used }

    /// Log lines dropped so far because the logger could not keep up (`maxPendingLogLines`).
    public var droppedLogLines: Int { core.droppedLogLines.load(ordering: .relaxed) }

    /// Times `accept` found no file descriptor free (`EMFILE`, `ENFILE`) and accepting paused.
    public var acceptPauses: Int { acceptPause.withLock { $0.total } }

    /// The port actually bound (useful with port 0), or nil before `start()`.
    public var boundPort: Int? {
        phase.withLock { if case .running(_, let port) = $0 { port } else { nil } }
    }

    /// Binds and starts serving. Throws when the address cannot be bound. Also makes the process
    /// ignore `SIGPIPE`, so a peer that vanished mid-write costs an `EPIPE`, not the process.
    public func start() throws {
        signal(SIGPIPE, SIG_IGN)
        let c = core.configuration
        guard loops.allSatisfy(\.isUsable), overflowLoop.isUsable else { throw ListeningSocket.Failure(description: "epoll_create1 failed") }
        let socket = try ListeningSocket.open(host: c.host, port: c.port, backlog: c.backlog)
        let source = DispatchSource.makeReadSource(fileDescriptor: socket.fd, queue: acceptQueue)
        source.setEventHandler { [self] in acceptPending(socket.fd) }
        source.setCancelHandler { Glibc.close(socket.fd) }
        let handle = ListenerHandle(source: source)
        let started = phase.withLock { p -> Bool in
            guard case .created = p else { return false }
            p = .running(listener: handle, port: socket.port)
            return true
        }
        guard started else {
            Glibc.close(socket.fd)
            throw ListeningSocket.Failure(description: "server already started")
        }
        for loop in allLoops { loop.start(sweepInterval: c.sweepInterval) }
        handle.source.resume()
        core.log(.info, "listening", [("host", .string(c.host)), ("port", .int(socket.port))])
    }

    private var allLoops: [IOLoop] { loops + [overflowLoop] }

    private func acceptPending(_ listenFD: Int32) {
        // Bounded per event so one busy listener cannot starve the accept queue's other work.
        for _ in 0..<256 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listenFD, $0, &length) }
            }
            if fd < 0 {
                let e = errno
                if e == EINTR || e == ECONNABORTED { continue }
                if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM {
                    // The listener stays readable while the connection waits in the backlog: without
                    // a pause this handler would run again at once, for as long as descriptors lack.
                    pauseAccepting(errno: e)
                } else if e != EAGAIN, e != EWOULDBLOCK {
                    core.log(.error, "accept failed", [("errno", .int(Int(e)))])
                }
                return
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let c = core.configuration
            let open = core.openConnections.add(1, ordering: .acquiringAndReleasing).newValue
            let reject = open > c.maxConnections
            if reject { core.openConnections.subtract(1, ordering: .acquiringAndReleasing) }
            let peer = IPAddress(storage)
            // The cap per peer: the connections beyond it are served one request, which the product
            // may refuse (`RequestContext.overConnectionCap`), then closed.
            var capped: IPAddress?
            var overCap = false
            if !reject, c.maxConnectionsPerPeer > 0, let peer, !c.uncappedPeer(peer) {
                capped = peer
                overCap = core.peerConnections.opened(peer) > c.maxConnectionsPerPeer
            }
            let loop: IOLoop
            if reject || overCap {
                loop = overflowLoop
            } else {
                let index = nextLoop.add(1, ordering: .relaxed).oldValue
                loop = loops[abs(index % loops.count)]
            }
            let core = self.core
            let countedPeer = capped
            let overTheCap = overCap
            loop.queue.async {
                Connection(fd: fd, loop: loop, core: core, counted: !reject, peer: peer, countedPeer: countedPeer,
                           overConnectionCap: overTheCap).start(reject: reject)
            }
        }
    }

    /// What the listener's pause for want of descriptors keeps (on the accept queue).
    private struct AcceptPause {
        var paused = false
        /// Pauses since the server started, and since the last log line.
        var total = 0
        var unlogged = 0
        var lastLogged: UInt64 = 0
    }

    /// On the accept queue: stops watching the listener for a moment after `accept` found no
    /// descriptor free; open connections go on being served, and closing them frees descriptors.
    /// One log line a second at most, with the pauses since the last one.
    private func pauseAccepting(errno e: Int32) {
        let pause = core.configuration.acceptPauseAfterDescriptorShortage
        let listener: ListenerHandle? = phase.withLock { if case .running(let listener, _) = $0 { listener } else { nil } }
        guard let listener else { return }
        let now = monotonicNow()
        let logPauses: Int? = acceptPause.withLock { state in
            guard !state.paused else { return nil }
            state.paused = true
            state.total += 1
            state.unlogged += 1
            guard state.lastLogged == 0 || now - state.lastLogged >= 1_000_000_000 else { return nil }
            defer {
                state.lastLogged = now
                state.unlogged = 0
            }
            return state.unlogged
        }
        listener.source.suspend()
        if let logPauses {
            core.log(.warning, "out of file descriptors: accepting paused", [
                ("errno", .int(Int(e))), ("open_connections", .int(openConnections)), ("pauses", .int(logPauses)),
                ("pause_ms", .int(Int(pause.nanoseconds / 1_000_000))),
            ])
        }
        acceptQueue.asyncAfter(deadline: .now() + pause.dispatchInterval) { [self] in resumeAccepting() }
    }

    /// On the accept queue: watches the listener again after a pause (unless shutdown did).
    private func resumeAccepting() {
        // Once shutdown began the pause is left for it to end (it resumes the cancelled listener).
        let listener: ListenerHandle? = phase.withLock { if case .running(let listener, _) = $0 { listener } else { nil } }
        guard let listener else { return }
        let resume = acceptPause.withLock { state -> Bool in
            defer { state.paused = false }
            return state.paused
        }
        if resume { listener.source.resume() }
    }

    /// Stops the server: stops accepting (closes the listener), closes idle connections at once, lets
    /// requests in flight finish and their responses be written for up to `gracePeriod`, then closes
    /// whatever is left. Returns when the server has stopped; later calls wait for the first.
    public func shutdown(gracePeriod: Duration) {
        var listenerToResume: ListenerHandle?
        let first = phase.withLock { p -> Bool in
            switch p {
            case .running(let listener, _):
                listenerToResume = listener
                listener.source.cancel()
                p = .stopping
                return true
            case .created:
                p = .stopped
                stoppedGroup.leave()
                return false
            case .stopping, .stopped:
                return false
            }
        }
        guard first else {
            waitUntilStopped()
            return
        }
        core.shuttingDown.store(true, ordering: .releasing)
        // A connection accepted just before the listener closed is handled normally and closed after
        // its response; the accept queue is drained so none slips past the sweep below. A listener
        // paused for want of descriptors is resumed, so that its cancellation (closing it) happens.
        acceptQueue.sync {
            if acceptPause.withLock({ state in defer { state.paused = false }; return state.paused }) { listenerToResume?.source.resume() }
        }
        for loop in allLoops { loop.queue.sync { loop.beginShutdown() } }
        if core.openConnections.load(ordering: .acquiring) > 0 {
            _ = core.drained.wait(timeout: .now() + gracePeriod.dispatchInterval)
        }
        for loop in allLoops { loop.queue.sync { loop.forceClose() } }
        core.workers.stop()
        core.log(.info, "stopped", [])
        core.flushLogs()
        phase.withLock { $0 = .stopped }
        stoppedGroup.leave()
    }

    /// Blocks the calling thread until the server has stopped.
    public func waitUntilStopped() {
        stoppedGroup.wait()
    }

    /// Suspends until the server has stopped, for async callers.
    public func stopped() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            stoppedGroup.notify(queue: .global()) { c.resume() }
        }
    }
}

/// The listener's read source. `@unchecked Sendable`: Dispatch sources are thread-safe objects; the
/// handle is only resumed once in `start` and cancelled once, under the server's phase lock.
struct ListenerHandle: @unchecked Sendable {
    let source: DispatchSourceRead
}
