import Dispatch
import Glibc
import HTTP
import Runtime

/// One accepted socket: reads requests into its buffer, parses them with the pure parser, hands
/// complete requests to a worker thread, writes responses in order, and enforces the limits and
/// timeouts. The request/response cycle lives in `state` (a `ConnectionState`).
///
/// Its concerns are split by file: this one holds its state, its lifecycle and reading;
/// `Connection+Handling.swift` the body budget and the handing of requests to their handlers;
/// `Connection+Writing.swift` responses, whole or streamed, and their flushing. The members are
/// internal so that those extensions can use them; nothing outside this type calls them.
///
/// `@unchecked Sendable`: every stored `var` is only read or written on `loop.queue`, a serial queue
/// (all entry points are source handlers on that queue or blocks dispatched to it); the conformance
/// only lets worker threads capture the connection in order to hop back onto that queue.
final class Connection: @unchecked Sendable {
    let fd: Int32
    let loop: IOLoop
    let core: ServerCore
    /// Whether this connection counts against `maxConnections` (a rejected one does not).
    let counted: Bool
    /// The TCP peer, from `accept`.
    let peer: IPAddress?
    /// The peer this connection counts for in `ServerCore.peerConnections` (nil: not counted).
    let countedPeer: IPAddress?

    var state: ConnectionState
    var buffer: [UInt8] = []
    var outbound: [UInt8] = []
    var outboundOffset = 0
    var lastWriteProgress: UInt64

    /// What the loop's epoll set wakes this connection for: reading unless paused or at EOF,
    /// writing only while a `send` has met `EAGAIN`.
    var interest = IOLoop.Interest(read: true, write: false)
    var registered = false

    /// Bytes of the server's body budget this connection holds (for the request under way).
    var bodyReserved = 0
    /// A reservation of the body budget waiting for its turn, and its size.
    var budgetWait: (ticket: UInt64, bytes: Int)?

    /// Buffered input beyond this while a response is pending pauses reading (pipelining backpressure).
    var maxBufferedWhileBusy: Int { core.configuration.limits.maxHeadBytes + 65536 }

    init(fd: Int32, loop: IOLoop, core: ServerCore, counted: Bool, peer: IPAddress?, countedPeer: IPAddress? = nil,
         overConnectionCap: Bool = false) {
        self.fd = fd
        self.loop = loop
        self.core = core
        self.counted = counted
        self.peer = peer
        self.countedPeer = countedPeer
        let now = monotonicNow()
        state = ConnectionState(now: now, overConnectionCap: overConnectionCap)
        lastWriteProgress = now
    }

    // MARK: - Lifecycle

    /// On `loop.queue`: joins the loop's epoll set; a rejected connection is answered 503 at once.
    func start(reject: Bool) {
        registered = loop.add(self, fd: fd, interest: interest)
        guard registered else {
            close()
            return
        }
        if reject {
            let exchange = ConnectionState.Exchange(method: nil, path: "-", route: "unmatched", requestID: RequestID.generate(),
                                                    version: .http1_1, startedAt: monotonicNow(), keepAlive: false)
            state.refuseAndClose(exchange)
            sendFull(ErrorResponse.make(status: ServerRefusal.unavailable.status, code: ServerRefusal.unavailable.code,
                                        message: "too many open connections", headers: [("Retry-After", "1")], format: core.router.errorBody))
        }
    }

    /// Closes the connection now. Safe to call more than once: the fd leaves the epoll set and is
    /// closed exactly once, on the loop's queue.
    func close() {
        let (wasOpen, stream) = state.close()
        guard wasOpen else { return }
        stream?.fail()
        buffer = []
        outbound = []
        if registered { loop.remove(fd: fd) }
        registered = false
        core.closeDescriptor(fd)
        releaseBodyBudget()
        if let countedPeer { core.peerConnections.closed(countedPeer) }
        if counted { core.connectionClosed() }
    }

    /// Closes with a reset (`SO_LINGER` of 0): no `FIN` exchange and no `TIME_WAIT` left behind.
    /// For a connection over its peer's cap that sent nothing in its time, which a client hoarding
    /// connections makes by the hundred a second: an orderly close cost the machine a `FIN` and
    /// its acknowledgements each, in bursts of a sweep's closes that delayed everyone's requests.
    /// Nothing was asked on it, so nothing is lost: its peer reads a reset where it would have
    /// read the end of the stream.
    func abort() {
        guard !state.isClosed else { return }
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close()
    }

    /// On `loop.queue`, from the loop's epoll set: what the socket is ready for. An error or hang-up
    /// on a connection that asked for neither reading nor writing (a reset while its handler runs)
    /// would be reported again and again: nothing more can be done on it, so it closes.
    func ready(readable: Bool, writable: Bool, hangUp: Bool) {
        if writable || (hangUp && interest.write) { flush() }
        if readable || (hangUp && interest.read) { onReadable() }
        if hangUp, !interest.read, !interest.write { close() }
    }

    func setInterest(read: Bool? = nil, write: Bool? = nil) {
        var wanted = interest
        if let read { wanted.read = read }
        if let write { wanted.write = write }
        guard wanted != interest, registered, !state.isClosed else { return }
        interest = wanted
        loop.update(fd: fd, interest: wanted)
    }

    /// Server shutdown: idle connections close now, the others after their current response.
    func beginShutdown() {
        if state.closesAtShutdown() { close() }
    }

    /// Timer sweep: enforces the idle, header, body, write and linger timeouts.
    func sweep(now: UInt64) {
        let unsentSince = outboundOffset < outbound.count ? lastWriteProgress : nil
        switch state.sweep(now: now, timeouts: core.timeouts, shuttingDown: core.isShuttingDown, unsentSince: unsentSince) {
        case .none:
            break
        case .close:
            close()
        case .abort:
            abort()
        case .closeStalledWrite:
            core.log(.warning, "write timeout, closing", [])
            close()
        case .requestTimeout(let message, let exchange):
            refuse(status: ServerRefusal.requestTimeout.status, code: ServerRefusal.requestTimeout.code, message: message, exchange: exchange)
        case .bodyBudgetTimeout(let exchange):
            // Its body was not read: the connection cannot go on (API.md section 6).
            releaseBodyBudget()
            refuse(status: ServerRefusal.unavailable.status, code: ServerRefusal.unavailable.code,
                   message: "the server holds too many request bodies at the moment; retry the same request",
                   exchange: exchange, headers: [("Retry-After", "1")])
        }
    }

    // MARK: - Reading

    func onReadable() {
        guard !state.isClosed else { return }
        let n = loop.readBuffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n > 0 {
            if state.isLingering { return }
            buffer.append(contentsOf: loop.readBuffer[0..<n])
        } else if n == 0 {
            switch state.inputEnded() {
            case .close:
                close()
                return
            case .stopReading:
                // Level-triggered: a socket at EOF would be reported readable forever.
                setInterest(read: false)
            }
        } else {
            let e = errno
            if e == EAGAIN || e == EWOULDBLOCK || e == EINTR { return }
            close()
            return
        }
        process()
    }

    func pauseReading() {
        setInterest(read: false)
    }

    func resumeReading() {
        if !state.peerClosedInput { setInterest(read: true) }
    }

    /// Advances the state machine over the buffered bytes as far as they allow.
    func process() {
        while true {
            switch state.phase {
            case .idle, .readingHead:
                if buffer.isEmpty {
                    if state.peerClosedInput { close() }
                    return
                }
                state.headBytesBuffered(now: monotonicNow())
                switch core.parser.parseHead(buffer[...]) {
                case .incomplete:
                    if state.peerClosedInput { close() }
                    return
                case .invalid(let e):
                    refuse(status: e.status, code: e.code, message: e.reason, exchange: nil)
                    return
                case .complete(let head, let consumed):
                    buffer.removeFirst(consumed)
                    beginRequest(head)
                }
            case .readingBody(var pending):
                // Waiting for room in the body budget: nothing more of the body is taken, not even
                // what arrived with the head (`bodyBudgetGranted` goes on from here).
                if budgetWait != nil { return }
                let result: BodyParseResult
                switch pending.head.bodyFraming {
                case .none:
                    result = .complete([], consumed: 0)
                case .contentLength(let length):
                    result = buffer.count >= length ? .complete(Array(buffer[0..<length]), consumed: length) : .incomplete
                case .chunked:
                    var decoder = pending.decoder ?? ChunkedBodyDecoder(limits: core.configuration.limits)
                    result = decoder.decode(buffer[...])
                    pending.decoder = decoder
                }
                switch result {
                case .incomplete:
                    state.awaitBody(pending)
                    if state.peerClosedInput {
                        close()
                        return
                    }
                    // A chunked body's size is known only at its end: its buffered bytes (and
                    // what it decoded so far) take room in the budget as they come.
                    if budgetWait == nil, case .chunked = pending.head.bodyFraming {
                        let wanted = min(2 * buffer.count + Self.chunkedBudgetStep, core.bodyBudget.limit)
                        if wanted > bodyReserved { _ = reserveBody(max(wanted - bodyReserved, Self.chunkedBudgetStep)) }
                    }
                    return
                case .invalid(let e):
                    refuse(status: e.status, code: e.code, message: e.reason, exchange: pending.exchange)
                    return
                case .complete(let body, let consumed):
                    buffer.removeFirst(consumed)
                    dispatch(HTTPRequest(head: pending.head, body: body), pending)
                }
            case .responding:
                if buffer.count > maxBufferedWhileBusy { pauseReading() }
                return
            case .lingering, .closed:
                return
            }
        }
    }

    /// A head is complete: route it, run its head check, refuse an oversized body, answer
    /// `100 Continue`, then read the body or dispatch at once.
    func beginRequest(_ head: HTTPRequestHead) {
        var exchange = ConnectionState.Exchange(method: head.method, path: head.path, route: "unmatched",
                                                requestID: RequestID.take(from: head.headers["X-Request-Id"]),
                                                version: head.version, startedAt: monotonicNow(), keepAlive: head.keepAlive)
        switch core.router.route(head, requestID: exchange.requestID, peer: peer, overConnectionCap: state.overConnectionCap) {
        case .refused(let pattern, let response, let unexpected):
            if let pattern { exchange = exchange.withRoute(pattern) }
            if let unexpected { logUnexpected(unexpected, exchange) }
            state.refuseBeforeBody(exchange, bodyFollows: head.hasBody)
            sendFull(response)
        case .accepted(let route):
            exchange = exchange.withRoute(route.pattern)
            if let e = core.parser.checkBodySize(head) {
                refuse(status: e.status, code: e.code, message: e.reason, exchange: exchange)
                return
            }
            let pending = ConnectionState.PendingBody(head: head, exchange: exchange, route: route, decoder: nil, since: monotonicNow())
            if head.hasBody {
                state.awaitBody(pending)
                // Room for the body first (all of a known length; a chunked body takes it as it
                // comes); `100 Continue` only once the body may be read.
                let first: Int
                if case .contentLength(let length) = head.bodyFraming { first = length } else { first = Self.chunkedBudgetStep }
                if reserveBody(first), head.expectsContinue, buffer.isEmpty { enqueue(HTTPResponseSerializer.continueResponse) }
            } else {
                dispatch(HTTPRequest(head: head, body: []), pending)
            }
        }
    }
}

extension ConnectionState.Exchange {
    /// A `HEAD` request: answered with the head of the `GET` answer only.
    var isHead: Bool { method == .head }

    func withRoute(_ route: String) -> ConnectionState.Exchange {
        var copy = ConnectionState.Exchange(method: method, path: path, route: route, requestID: requestID, version: version,
                                            startedAt: startedAt, keepAlive: keepAlive)
        copy.status = status
        return copy
    }
}

extension Connection {
    /// Runs `body` on the connection's queue (for the producer thread of a streamed body).
    func queueAsync(_ body: @escaping @Sendable () -> Void) { loop.queue.async(execute: body) }
}
