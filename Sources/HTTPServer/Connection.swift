import Dispatch
import Glibc
import HTTP

/// One accepted socket: reads requests into its buffer, parses them with the pure parser, hands
/// complete requests to a worker thread, writes responses in order, and enforces the limits and
/// timeouts. The request/response cycle lives in `state` (a `ConnectionState`).
///
/// `@unchecked Sendable`: every stored `var` is only read or written on `loop.queue`, a serial queue
/// (all entry points are source handlers on that queue or blocks dispatched to it); the conformance
/// only lets worker threads capture the connection in order to hop back onto that queue.
final class Connection: @unchecked Sendable {
    private let fd: Int32
    private let loop: IOLoop
    private let core: ServerCore
    /// Whether this connection counts against `maxConnections` (a rejected one does not).
    private let counted: Bool
    /// The TCP peer, from `accept`.
    let peer: IPAddress?
    /// The peer this connection counts for in `ServerCore.peerConnections` (nil: not counted).
    private let countedPeer: IPAddress?

    private(set) var state: ConnectionState
    private var buffer: [UInt8] = []
    private var outbound: [UInt8] = []
    private var outboundOffset = 0
    private var lastWriteProgress: UInt64

    /// What the loop's epoll set wakes this connection for: reading unless paused or at EOF,
    /// writing only while a `send` has met `EAGAIN`.
    private var interest = IOLoop.Interest(read: true, write: false)
    private var registered = false

    /// Bytes of the server's body budget this connection holds (for the request under way).
    private var bodyReserved = 0
    /// A reservation of the body budget waiting for its turn, and its size.
    private var budgetWait: (ticket: UInt64, bytes: Int)?

    /// Buffered input beyond this while a response is pending pauses reading (pipelining backpressure).
    private var maxBufferedWhileBusy: Int { core.configuration.limits.maxHeadBytes + 65536 }

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
            let exchange = ConnectionState.Exchange(method: "-", path: "-", route: "unmatched", requestID: RequestID.generate(),
                                                    version: .http1_1, startedAt: monotonicNow(), keepAlive: false)
            state.refuseAndClose(exchange)
            sendFull(ErrorResponse.make(status: .serviceUnavailable, code: "unavailable",
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

    /// On `loop.queue`, from the loop's epoll set: what the socket is ready for. An error or hang-up
    /// on a connection that asked for neither reading nor writing (a reset while its handler runs)
    /// would be reported again and again: nothing more can be done on it, so it closes.
    func ready(readable: Bool, writable: Bool, hangUp: Bool) {
        if writable || (hangUp && interest.write) { flush() }
        if readable || (hangUp && interest.read) { onReadable() }
        if hangUp, !interest.read, !interest.write { close() }
    }

    private func setInterest(read: Bool? = nil, write: Bool? = nil) {
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
        case .closeStalledWrite:
            core.log(.warning, "write timeout, closing", [])
            close()
        case .requestTimeout(let message, let exchange):
            refuse(status: .requestTimeout, code: "request_timeout", message: message, exchange: exchange)
        case .bodyBudgetTimeout(let exchange):
            // Its body was not read: the connection cannot go on (API.md section 6).
            releaseBodyBudget()
            refuse(status: HTTPStatus(code: 503), code: "unavailable",
                   message: "the server holds too many request bodies at the moment; retry the same request",
                   exchange: exchange, headers: [("Retry-After", "1")])
        }
    }

    // MARK: - Reading

    private func onReadable() {
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

    private func pauseReading() {
        setInterest(read: false)
    }

    private func resumeReading() {
        if !state.peerClosedInput { setInterest(read: true) }
    }

    /// Advances the state machine over the buffered bytes as far as they allow.
    private func process() {
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
    private func beginRequest(_ head: HTTPRequestHead) {
        var exchange = ConnectionState.Exchange(method: head.method.rawValue, path: head.path, route: "unmatched",
                                                requestID: RequestID.take(from: head.headers["X-Request-Id"]),
                                                version: head.version, startedAt: monotonicNow(), keepAlive: head.keepAlive)
        switch core.router.route(head, requestID: exchange.requestID, peer: peer, overConnectionCap: state.overConnectionCap) {
        case .refused(let pattern, let response, let error):
            if let pattern { exchange = exchange.withRoute(pattern) }
            if let error { logUnexpected(error, exchange) }
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

    // MARK: - The body budget

    /// How much of the body budget a chunked body takes at a time.
    private static let chunkedBudgetStep = 128 * 1024

    /// Takes `bytes` more of the server's body budget for the request under way. False when they
    /// must wait for their turn: reading stops until `bodyBudgetGranted`, or the sweep gives up.
    private func reserveBody(_ bytes: Int) -> Bool {
        guard bytes > 0 else { return true }
        let loop = self.loop
        switch core.bodyBudget.reserve(bytes, granted: { [self] in loop.queue.async { self.bodyBudgetGranted() } }) {
        case .reserved:
            bodyReserved += bytes
            return true
        case .waiting(let ticket):
            budgetWait = (ticket, bytes)
            state.waitForBodyBudget(now: monotonicNow())
            pauseReading()
            return false
        }
    }

    /// On `loop.queue`: the budget made room for the waiting reservation.
    private func bodyBudgetGranted() {
        guard let (ticket, bytes) = budgetWait, core.bodyBudget.take(ticket) else { return }
        budgetWait = nil
        bodyReserved += bytes
        guard case .readingBody(let pending) = state.phase else {
            releaseBodyBudget()
            return
        }
        state.bodyBudgetGranted(now: monotonicNow())
        if pending.head.expectsContinue, buffer.isEmpty { enqueue(HTTPResponseSerializer.continueResponse) }
        resumeReading()
        process()
    }

    /// Gives back what this connection holds of the body budget, and gives up a waiting reservation.
    private func releaseBodyBudget() {
        if let (ticket, bytes) = budgetWait {
            budgetWait = nil
            if core.bodyBudget.cancel(ticket) { bodyReserved += bytes }
        }
        let held = bodyReserved
        bodyReserved = 0
        core.bodyBudget.release(held)
    }

    /// Answers a refusal that ends the connection (`400`, `408`, `413`, `414`, `431`, `505`, and
    /// `503` for a body that waited too long for room).
    private func refuse(status: HTTPStatus, code: String, message: String, exchange: ConnectionState.Exchange?,
                        headers: [(String, String)] = []) {
        state.refuseAndClose(exchange ?? ConnectionState.Exchange(method: "-", path: "-", route: "unmatched", requestID: RequestID.generate(),
                                                                  version: .http1_1, startedAt: monotonicNow(), keepAlive: false))
        sendFull(ErrorResponse.make(status: status, code: code, message: message, headers: headers, format: core.router.errorBody))
    }

    // MARK: - Handling

    /// Runs the request's handler its way (`Router.run`, shared with in-process callers) and sends
    /// its answer from wherever it comes.
    private func dispatch(_ request: HTTPRequest, _ pending: ConnectionState.PendingBody) {
        let logged = state.handle(pending, keepAlive: request.keepAlive)
        let context = RequestContext(request: request, route: logged.route, parameters: pending.route.parameters, requestID: logged.requestID,
                                     peer: peer, overConnectionCap: state.overConnectionCap)
        let workers = core.workers
        core.router.run(pending.route, context, offload: { workers.submit($0) },
                        unexpected: { [self] error in logUnexpected(error, logged) }) { [self] response, thread in
            deliver(response, for: request, logged, from: thread)
        }
    }

    /// Sends a handler's answer: a full body on the IO queue (at once when it is already there), a
    /// streamed one from a worker thread, where its producer may block.
    private func deliver(_ response: HTTPResponse, for request: HTTPRequest, _ logged: ConnectionState.Exchange, from thread: AnsweringThread) {
        switch (response.body, thread) {
        case (.bytes, .caller):
            sendFull(response)
        case (.bytes, _):
            loop.queue.async { self.sendFull(response) }
        case (.stream(let produce), .worker):
            stream(response, produce, for: request, logged)
        case (.stream(let produce), _):
            core.workers.submit { [self] in stream(response, produce, for: request, logged) }
        }
    }

    /// Produces and sends a streamed body; runs on a worker thread. HTTP/1.1 frames it as chunks;
    /// HTTP/1.0, which has no chunked coding, gets the bytes as they come and the body ends with
    /// the connection (`Connection: close`, no `Content-Length`), so memory holds what the client
    /// has not taken yet, never the whole body.
    private func stream(_ response: HTTPResponse, _ produce: @Sendable (any HTTPBodyWriter) throws -> Void, for request: HTTPRequest,
                        _ logged: ConnectionState.Exchange) {
        let closeDelimited = request.version == .http1_0
        if request.method == .head {
            // The head a GET would get, without producing the body.
            loop.queue.async { self.beginStream(response, nil, closeDelimited: closeDelimited) }
            return
        }
        let channel = StreamedBodyChannel(limit: core.configuration.streamBufferBytes)
        loop.queue.async { self.beginStream(response, channel, closeDelimited: closeDelimited) }
        let writer = ConnectionBodyWriter(connection: self, channel: channel, chunked: !closeDelimited)
        do {
            try produce(writer)
            loop.queue.async { self.endStream(succeeded: true, closeDelimited: closeDelimited) }
        } catch {
            if !(error is ClientGone) && !(error is HTTPBodyWriterDeadline) { logUnexpected(error, logged) }
            loop.queue.async { self.endStream(succeeded: false, closeDelimited: closeDelimited) }
        }
    }

    private func logUnexpected(_ error: any Error, _ exchange: ConnectionState.Exchange) {
        guard !(error is any HTTPResponseError) else { return }
        core.log(.error, "handler failed", [("request_id", .string(exchange.requestID)), ("route", .string(exchange.route)),
                                            ("error", .string(String(describing: error)))])
    }

    // MARK: - Writing

    private func sendFull(_ response: HTTPResponse) {
        guard case .responding = state.phase else { return }
        guard case .bytes(let body) = response.body else { return }
        let connection = state.responseHead(status: response.status, shuttingDown: core.isShuttingDown)
        state.updateExchange { exchange in
            exchange.status = response.status.code
            exchange.errorCode = response.errorCode
            exchange.bodyBytes = exchange.isHead ? 0 : body.count
            exchange.complete = true
        }
        guard let exchange = state.exchange else { return }
        var headers = response.headers
        headers.replaceOrAdd(name: "X-Request-Id", value: exchange.requestID)
        if exchange.isHead {
            // RFC 9110, 9.1: the GET answer's status and headers, Content-Length included, no body.
            enqueue(HTTPResponseSerializer.head(status: response.status, headers: headers, framing: .contentLength(body.count),
                                                date: HTTPDate.now(), connection: connection))
        } else {
            enqueue(HTTPResponseSerializer.response(status: response.status, headers: headers, body: body,
                                                    date: HTTPDate.now(), connection: connection))
        }
    }

    /// Sends the head of a streamed response; its chunks follow through `channel`. Without a
    /// channel (a `HEAD` request) the head is the whole response. A close-delimited body closes
    /// the connection after it.
    private func beginStream(_ response: HTTPResponse, _ channel: StreamedBodyChannel?, closeDelimited: Bool) {
        guard case .responding = state.phase else {
            channel?.fail()
            return
        }
        if closeDelimited { state.updateExchange { $0.keepAlive = false } }
        let connection = state.responseHead(status: response.status, shuttingDown: core.isShuttingDown)
        state.updateExchange { exchange in
            exchange.status = response.status.code
            exchange.errorCode = response.errorCode
            exchange.stream = channel
            if channel == nil { exchange.complete = true }
        }
        var headers = response.headers
        headers.replaceOrAdd(name: "X-Request-Id", value: state.exchange?.requestID ?? RequestID.generate())
        enqueue(HTTPResponseSerializer.head(status: response.status, headers: headers, framing: closeDelimited ? .closeDelimited : .chunked,
                                            date: HTTPDate.now(), connection: connection))
    }

    /// A chunk from the producer thread (already accounted in the channel).
    func streamChunk(_ bytes: [UInt8], bodyBytes: Int) {
        guard case .responding = state.phase else { return }
        state.updateExchange { $0.bodyBytes += bodyBytes }
        enqueue(bytes)
    }

    private func endStream(succeeded: Bool, closeDelimited: Bool) {
        guard case .responding = state.phase else { return }
        guard succeeded else {
            // The status line is gone already: all we can do is cut the body short.
            close()
            return
        }
        state.updateExchange { $0.complete = true }
        if closeDelimited {
            // The body ends with the connection, once the rest is sent.
            flush()
        } else {
            enqueue(HTTPResponseSerializer.lastChunk)
        }
    }

    private func enqueue(_ bytes: [UInt8]) {
        guard !state.isClosed else { return }
        if outboundOffset == outbound.count {
            outbound = bytes
            outboundOffset = 0
        } else {
            outbound.append(contentsOf: bytes)
        }
        flush()
    }

    /// Writes what the kernel takes; asks the epoll set for writability only on `EAGAIN`.
    private func flush() {
        while outboundOffset < outbound.count {
            let written = outbound.withUnsafeBytes { raw -> Int in
                // Non-nil: the array is not empty, since outboundOffset < count.
                guard let base = raw.baseAddress else { return 0 }
                return send(fd, base + outboundOffset, raw.count - outboundOffset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                outboundOffset += written
                lastWriteProgress = monotonicNow()
                state.exchange?.stream?.release(written)
            } else {
                let e = errno
                if written < 0, e == EINTR { continue }
                if written < 0, e == EAGAIN || e == EWOULDBLOCK {
                    setInterest(write: true)
                    return
                }
                close()
                return
            }
        }
        outbound = []
        outboundOffset = 0
        if interest.write { setInterest(write: false) }
        if case .responding(let exchange) = state.phase, exchange.complete { finishResponse(exchange) }
    }

    /// The last byte of a response went to the kernel: record it, then close or wait for the next
    /// request (which may already be buffered).
    private func finishResponse(_ exchange: ConnectionState.Exchange) {
        let observer = core.observer
        let logging = core.logger.isEnabled(.info)
        if observer != nil || logging {
            let record = ResponseRecord(method: exchange.method, path: exchange.path, route: exchange.route, status: exchange.status,
                                        durationSeconds: Double(monotonicNow() - exchange.startedAt) / 1e9,
                                        bytes: exchange.bodyBytes, requestID: exchange.requestID, errorCode: exchange.errorCode)
            observer?.didRespond(record)
            if logging { core.logAccess(record) }
        }
        // The request's body is no longer held (the handler answered): its room goes to the next.
        if bodyReserved > 0 || budgetWait != nil { releaseBodyBudget() }
        switch state.responseSent(now: monotonicNow(), shuttingDown: core.isShuttingDown, bufferEmpty: buffer.isEmpty) {
        case .close:
            close()
        case .linger:
            shutdown(fd, Int32(SHUT_WR))
            buffer = []
            resumeReading()
        case .nextRequest:
            resumeReading()
            process()
        }
    }
}

extension ConnectionState.Exchange {
    /// A `HEAD` request: answered with the head of the `GET` answer only.
    var isHead: Bool { method == HTTPMethod.head.rawValue }

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
