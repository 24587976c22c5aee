import HTTP

/// Where a connection is in its request/response cycle, after swift-nio's
/// `HTTPServerPipelineHandler` and Hummingbird's connection state machine: one request at a time,
/// so pipelined requests are handled and answered strictly in order (and a pipelined `PUT` then
/// `GET` sees the `PUT`). Bytes of later requests wait in the connection's buffer.
///
/// Every change of phase is a transition method here; those after which the connection has a choice
/// to make return the action it must take (`Connection` performs the socket calls). No transition
/// reads a clock: the time comes in as `now`, so tests drive the machine, timeouts included, without
/// sockets or sleeps.
struct ConnectionState {
    enum Phase {
        /// Between requests, no byte of the next one yet: the idle timeout runs.
        case idle(since: UInt64)
        /// Some bytes of a head arrived: the header timeout runs from the first one.
        case readingHead(since: UInt64)
        /// The head was accepted and routed; the body is arriving.
        case readingBody(PendingBody)
        /// A handler is running or a response is being written.
        case responding(Exchange)
        /// The server decided to close: the write side is shut and input is discarded until the
        /// peer closes or the linger timeout passes.
        case lingering(since: UInt64)
        /// The fd is closed (or closing); nothing more happens.
        case closed
    }

    private(set) var phase: Phase
    /// The peer shut its side (`read` gave 0): no further request can come.
    private(set) var peerClosedInput = false
    /// The connection is beyond its peer's connection cap (`maxConnectionsPerPeer`): it is served
    /// one request (which the product may refuse `429`), then closed, and that request's head must
    /// come quickly (`Timeouts.overCap`, both idle and while the head arrives).
    let overConnectionCap: Bool

    init(now: UInt64, overConnectionCap: Bool = false) {
        phase = .idle(since: now)
        self.overConnectionCap = overConnectionCap
    }

    /// A request whose body is being read.
    struct PendingBody {
        let head: HTTPRequestHead
        let exchange: Exchange
        /// The endpoint that takes the request once its body is read.
        let route: Router.Accepted
        var decoder: ChunkedBodyDecoder?
        /// When the body started to be read (the body timeout runs from here).
        var since: UInt64
        /// When the request began to wait for its body's turn under the server's body budget
        /// (`maxBufferedBodyBytes`); nil while it is not waiting.
        var budgetWaitSince: UInt64? = nil
    }

    /// One request and its response, for framing decisions and the access log.
    struct Exchange {
        /// Nil when no request line could be read (a refusal of the head).
        let method: HTTPMethod?
        let path: String
        let route: String
        let requestID: String
        let version: HTTPVersion
        let startedAt: UInt64
        /// Whether the connection stays open after this response.
        var keepAlive: Bool
        var status = 0
        var bodyBytes = 0
        /// The response's error code, for the access log.
        var errorCode: String?
        /// The response's observation, for the observer.
        var observation: (any Sendable)?
        /// Every byte of the response has been queued for writing.
        var complete = false
        /// The backpressure channel of a streamed body, while one is being sent.
        var stream: StreamedBodyChannel?
    }

    /// The exchange a response belongs to, when there is one.
    var exchange: Exchange? {
        if case .responding(let e) = phase { return e }
        return nil
    }

    var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }

    var isLingering: Bool {
        if case .lingering = phase { return true }
        return false
    }

    // MARK: - Transitions
    //
    // Each transition names the phases it may start from; any other is a bug in `Connection`,
    // caught in debug builds (`expect`). Release builds carry on: the phase is replaced as asked.

    /// A phase without what it holds, to say which phases a transition may start from.
    enum PhaseKind: Hashable {
        case idle, readingHead, readingBody, responding, lingering, closed
    }

    var phaseKind: PhaseKind {
        switch phase {
        case .idle: .idle
        case .readingHead: .readingHead
        case .readingBody: .readingBody
        case .responding: .responding
        case .lingering: .lingering
        case .closed: .closed
        }
    }

    /// Asserts, in debug builds, that the connection is in one of `phases` for `transition`.
    private func expect(_ phases: Set<PhaseKind>, for transition: StaticString) {
        assert(phases.contains(phaseKind), "ConnectionState.\(transition) from \(phaseKind)")
    }

    private static let beforeAResponse: Set<PhaseKind> = [.idle, .readingHead, .readingBody]

    /// Bytes of a head are buffered: an idle connection starts its header timeout now.
    mutating func headBytesBuffered(now: UInt64) {
        if case .idle = phase { phase = .readingHead(since: now) }
    }

    /// The head is routed and its body follows.
    mutating func awaitBody(_ pending: PendingBody) {
        expect([.idle, .readingHead, .readingBody], for: "awaitBody")
        phase = .readingBody(pending)
    }

    /// The body's next bytes must wait for room in the server's body budget: the body timeout
    /// stops, the budget's wait starts (`sweep` answers `503` when it passes).
    mutating func waitForBodyBudget(now: UInt64) {
        expect([.readingBody], for: "waitForBodyBudget")
        if case .readingBody(var pending) = phase {
            pending.budgetWaitSince = now
            phase = .readingBody(pending)
        }
    }

    /// The body budget made room: reading goes on, with the body timeout counted from now.
    mutating func bodyBudgetGranted(now: UInt64) {
        expect([.readingBody], for: "bodyBudgetGranted")
        if case .readingBody(var pending) = phase {
            pending.budgetWaitSince = nil
            pending.since = now
            phase = .readingBody(pending)
        }
    }

    /// Whether the request under way waits for room in the body budget.
    var waitsForBodyBudget: Bool {
        if case .readingBody(let pending) = phase { return pending.budgetWaitSince != nil }
        return false
    }

    /// A routed request is complete: its handler runs. The connection stays open after the
    /// response if the request asked for it (`keepAlive`: HTTP/1.1 without `Connection: close`,
    /// or HTTP/1.0 with `keep-alive`), unless the response's status says otherwise
    /// (`responseHead`). Returns the exchange, for the access log.
    mutating func handle(_ pending: PendingBody, keepAlive: Bool) -> Exchange {
        expect(Self.beforeAResponse, for: "handle")
        var exchange = pending.exchange
        exchange.keepAlive = keepAlive
        phase = .responding(exchange)
        return exchange
    }

    /// A request is refused from its head, before its body is read (`404`, `405`, a head check's
    /// answer): the connection can only stay open when no body follows, since an unread body's
    /// bytes would be taken for the next request.
    mutating func refuseBeforeBody(_ exchange: Exchange, bodyFollows: Bool) {
        expect(Self.beforeAResponse, for: "refuseBeforeBody")
        var refused = exchange
        refused.keepAlive = exchange.keepAlive && !bodyFollows
        phase = .responding(refused)
    }

    /// A refusal that ends the connection: a malformed or oversized request, a timeout, a
    /// connection over the cap. `exchange` is the request's when its head was read.
    mutating func refuseAndClose(_ exchange: Exchange) {
        expect(Self.beforeAResponse, for: "refuseAndClose")
        var refused = exchange
        refused.keepAlive = false
        phase = .responding(refused)
    }

    /// The `Connection` header of the response with `status` to the exchange under way, deciding
    /// whether the connection stays open after it: `400`, `408`, `413`, `414`, `431` and `505`
    /// close it (API.md section 5), `429` too (section 6: a client over its limit pays for a new
    /// connection, and an over-cap connection is gone), and so do a connection over its peer's cap
    /// and the server shutting down. nil: no header (HTTP/1.1 keeps the connection by default).
    mutating func responseHead(status: HTTPStatus, shuttingDown: Bool) -> String? {
        expect([.responding], for: "responseHead")
        guard case .responding(var exchange) = phase else { return "close" }
        switch status.code {
        case 400, 408, 413, 414, 429, 431, 505: exchange.keepAlive = false
        default: if shuttingDown || overConnectionCap { exchange.keepAlive = false }
        }
        phase = .responding(exchange)
        if !exchange.keepAlive { return "close" }
        return exchange.version == .http1_0 ? "keep-alive" : nil
    }

    /// Updates the exchange while responding; does nothing otherwise.
    mutating func updateExchange(_ change: (inout Exchange) -> Void) {
        if case .responding(var e) = phase {
            change(&e)
            phase = .responding(e)
        }
    }

    /// What to do when the peer has shut its side.
    enum InputEnd: Equatable {
        /// Lingering: that was what we waited for.
        case close
        /// Stop asking for readability (a socket at EOF is readable forever), then go on with
        /// what is buffered; the connection closes once nothing more can be answered.
        case stopReading
    }

    /// `read` gave 0.
    mutating func inputEnded() -> InputEnd {
        peerClosedInput = true
        return isLingering ? .close : .stopReading
    }

    /// What to do once the last byte of a response went to the kernel.
    enum AfterResponse: Equatable {
        /// Nothing unread could turn the close into a reset: close now.
        case close
        /// Shut the write side and drain input until the peer closes (RFC 9112 9.6), so the client
        /// reads this response rather than a reset caused by unread bytes.
        case linger
        /// Keep the connection: read on, and handle a next request already buffered.
        case nextRequest
    }

    /// The response of the exchange under way is written. `bufferEmpty`: no byte of a next request
    /// is buffered.
    mutating func responseSent(now: UInt64, shuttingDown: Bool, bufferEmpty: Bool) -> AfterResponse {
        expect([.responding], for: "responseSent")
        let keepAlive = exchange?.keepAlive ?? false
        if !keepAlive || shuttingDown {
            // `close()` ends the phase, when the connection performs the action.
            if peerClosedInput || (shuttingDown && bufferEmpty) { return .close }
            phase = .lingering(since: now)
            return .linger
        }
        phase = .idle(since: now)
        return .nextRequest
    }

    /// The timeouts the sweep enforces (`ServerConfiguration`'s, in nanoseconds).
    struct Timeouts {
        var idle: UInt64
        var headerRead: UInt64
        var bodyRead: UInt64
        var write: UInt64
        var linger: UInt64
        /// The longest a body waits for room in the server's body budget.
        var bodyBudgetWait: UInt64
        /// The longest a connection over its peer's cap idles, or takes to send its head.
        var overCap: UInt64

        init(_ c: ServerConfiguration) {
            idle = c.idleTimeout.nanoseconds
            headerRead = c.headerReadTimeout.nanoseconds
            bodyRead = c.bodyReadTimeout.nanoseconds
            write = c.writeTimeout.nanoseconds
            linger = c.lingerTimeout.nanoseconds
            bodyBudgetWait = c.bodyBudgetWait.nanoseconds
            overCap = c.overCapTimeout.nanoseconds
        }

        init(idle: UInt64, headerRead: UInt64, bodyRead: UInt64, write: UInt64, linger: UInt64, bodyBudgetWait: UInt64 = 5_000_000_000,
             overCap: UInt64 = 1_000_000_000) {
            self.idle = idle
            self.headerRead = headerRead
            self.bodyRead = bodyRead
            self.write = write
            self.linger = linger
            self.bodyBudgetWait = bodyBudgetWait
            self.overCap = overCap
        }
    }

    /// What the timer sweep must do with the connection.
    enum SweepAction {
        case none
        /// Close silently (idle, lingering, or shutting down while idle).
        case close
        /// A connection over its peer's cap sent nothing in its time: reset it (nothing was asked,
        /// nothing is owed; see `Connection.abort`).
        case abort
        /// A response made no write progress for the write timeout: log it and close.
        case closeStalledWrite
        /// Answer `408` and close; `exchange` is the request's when its head was read.
        case requestTimeout(message: String, exchange: Exchange?)
        /// The body waited for room in the body budget too long: answer `503` and close.
        case bodyBudgetTimeout(exchange: Exchange)
    }

    /// The sweep at `now`. `unsentSince`: when a response with bytes still unsent last made write
    /// progress (nil when nothing is waiting to be written).
    func sweep(now: UInt64, timeouts: Timeouts, shuttingDown: Bool, unsentSince: UInt64?) -> SweepAction {
        func expired(_ since: UInt64, _ limit: UInt64) -> Bool { now > since && now - since > limit }
        switch phase {
        case .idle(let since):
            // A connection over its peer's cap may not wait long for its one request.
            if shuttingDown { return .close }
            guard overConnectionCap else { return expired(since, timeouts.idle) ? .close : .none }
            return expired(since, min(timeouts.idle, timeouts.overCap)) ? .abort : .none
        case .readingHead(let since):
            let limit = overConnectionCap ? min(timeouts.headerRead, timeouts.overCap) : timeouts.headerRead
            return expired(since, limit) ? .requestTimeout(message: "request head not received in time", exchange: nil) : .none
        case .readingBody(let pending):
            if let waiting = pending.budgetWaitSince {
                return expired(waiting, timeouts.bodyBudgetWait) ? .bodyBudgetTimeout(exchange: pending.exchange) : .none
            }
            return expired(pending.since, timeouts.bodyRead)
                ? .requestTimeout(message: "request body not received in time", exchange: pending.exchange) : .none
        case .responding:
            guard let unsentSince else { return .none }
            return expired(unsentSince, timeouts.write) ? .closeStalledWrite : .none
        case .lingering(let since):
            return expired(since, timeouts.linger) ? .close : .none
        case .closed:
            return .none
        }
    }

    /// Server shutdown: whether the connection closes now (idle) rather than after its response.
    func closesAtShutdown() -> Bool {
        if case .idle = phase { return true }
        return false
    }

    /// The connection is closing; returns the backpressure channel of a streamed body to fail,
    /// or nil. False `wasOpen` when it was closed already.
    mutating func close() -> (wasOpen: Bool, stream: StreamedBodyChannel?) {
        if isClosed { return (false, nil) }
        let stream = exchange?.stream
        phase = .closed
        return (true, stream)
    }
}
