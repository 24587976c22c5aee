import HTTP
@testable import HTTPServer
import Testing

/// The connection state machine without sockets: time is whatever the test says it is.
@Suite(.timeLimit(.minutes(3))) struct ConnectionStateTests {
    static let second: UInt64 = 1_000_000_000
    static let timeouts = ConnectionState.Timeouts(idle: 60 * second, headerRead: 10 * second, bodyRead: 30 * second,
                                                   write: 30 * second, linger: 2 * second)

    static func exchange(keepAlive: Bool = true) -> ConnectionState.Exchange {
        ConnectionState.Exchange(method: .get, path: "/x", route: "/x", requestID: "id", version: .http1_1, startedAt: 0, keepAlive: keepAlive)
    }

    static func pending(since: UInt64) throws -> ConnectionState.PendingBody {
        guard case .complete(let head, _) = HTTPRequestParser().parseHead(Array("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n".utf8)) else {
            throw HTTPError(.badRequest, code: "test", message: "the test's head does not parse")
        }
        let route = Router.Accepted(pattern: "/x", parameters: [:], handler: .onWorker { _ in .text(.ok, "") })
        return ConnectionState.PendingBody(head: head, exchange: exchange(), route: route, decoder: nil, since: since)
    }

    /// A connection whose handler runs, for a request that asked to keep the connection or not.
    static func responding(keepAlive: Bool = true) -> ConnectionState {
        var s = ConnectionState(now: 0)
        // The head parses: `pending` throws only if the test's own literal breaks.
        if let pending = try? pending(since: 0) { _ = s.handle(pending, keepAlive: keepAlive) }
        return s
    }

    func sweep(_ state: ConnectionState, at now: UInt64, shuttingDown: Bool = false, unsentSince: UInt64? = nil) -> String {
        switch state.sweep(now: now, timeouts: Self.timeouts, shuttingDown: shuttingDown, unsentSince: unsentSince) {
        case .none: "none"
        case .close: "close"
        case .abort: "reset"
        case .closeStalledWrite: "stalled"
        case .requestTimeout(_, let exchange): exchange == nil ? "408" : "408 with exchange"
        case .bodyBudgetTimeout: "503 body budget"
        }
    }

    @Test func anIdleConnectionClosesAfterTheIdleTimeoutOrAtShutdown() {
        let s = ConnectionState(now: 100)
        #expect(sweep(s, at: 100 + 60 * Self.second) == "none")
        #expect(sweep(s, at: 101 + 60 * Self.second) == "close")
        #expect(sweep(s, at: 200, shuttingDown: true) == "close")
        #expect(s.closesAtShutdown())
    }

    @Test func theHeaderTimeoutRunsFromTheFirstByteOfAHead() {
        var s = ConnectionState(now: 0)
        s.headBytesBuffered(now: 5 * Self.second)
        // More bytes of the same head do not restart it.
        s.headBytesBuffered(now: 9 * Self.second)
        #expect(sweep(s, at: 15 * Self.second) == "none")
        #expect(sweep(s, at: 15 * Self.second + 1) == "408")
        // Not idle any more: the idle timeout and shutdown leave it alone.
        #expect(!s.closesAtShutdown())
        #expect(sweep(s, at: 6 * Self.second, shuttingDown: true) == "none")
    }

    @Test func theBodyTimeoutAnswers408ForThatRequest() throws {
        var s = ConnectionState(now: 0)
        s.awaitBody(try Self.pending(since: Self.second))
        #expect(sweep(s, at: 31 * Self.second) == "none")
        #expect(sweep(s, at: 31 * Self.second + 1) == "408 with exchange")
    }

    @Test func theWriteTimeoutCountsOnlyWhileBytesWaitUnsent() {
        let s = Self.responding()
        // A handler that takes long has nothing unsent: no write timeout.
        #expect(sweep(s, at: 1000 * Self.second) == "none")
        #expect(sweep(s, at: 40 * Self.second, unsentSince: 10 * Self.second) == "none")
        #expect(sweep(s, at: 40 * Self.second + 1, unsentSince: 10 * Self.second) == "stalled")
    }

    @Test func afterAKeptAliveResponseTheConnectionIsIdleFromThen() {
        var s = Self.responding(keepAlive: true)
        #expect(s.responseSent(now: 7 * Self.second, shuttingDown: false, bufferEmpty: true) == .nextRequest)
        #expect(sweep(s, at: 67 * Self.second) == "none")
        #expect(sweep(s, at: 67 * Self.second + 1) == "close")
    }

    @Test func aClosingResponseLingersWhileInputMayStillArrive() {
        var s = Self.responding(keepAlive: false)
        #expect(s.responseSent(now: Self.second, shuttingDown: false, bufferEmpty: false) == .linger)
        #expect(s.isLingering)
        #expect(sweep(s, at: 3 * Self.second) == "none")
        #expect(sweep(s, at: 3 * Self.second + 1) == "close")
        // The peer's end is what lingering waits for.
        #expect(s.inputEnded() == .close)
    }

    @Test func aClosingResponseClosesAtOnceWhenNothingCanArrive() {
        var peerGone = Self.responding(keepAlive: false)
        #expect(peerGone.inputEnded() == .stopReading)
        #expect(peerGone.responseSent(now: 1, shuttingDown: false, bufferEmpty: false) == .close)

        var shutdown = Self.responding(keepAlive: true)
        #expect(shutdown.responseSent(now: 1, shuttingDown: true, bufferEmpty: true) == .close)
        var shutdownWithInput = Self.responding(keepAlive: true)
        #expect(shutdownWithInput.responseSent(now: 1, shuttingDown: true, bufferEmpty: false) == .linger)
    }

    @Test func closingHappensOnce() {
        var s = Self.responding()
        let channel = StreamedBodyChannel(limit: 10)
        s.updateExchange { $0.stream = channel }
        let first = s.close()
        #expect(first.wasOpen)
        #expect(first.stream === channel)
        #expect(!s.close().wasOpen)
        #expect(s.isClosed)
        #expect(sweep(s, at: 1000 * Self.second) == "none")
    }

    /// Keep-alive is decided here, in one place: by the request, then by the response's status and
    /// the server shutting down.
    @Test func keepAliveIsDecidedByTheRequestThenTheStatus() {
        var kept = Self.responding(keepAlive: true)
        #expect(kept.responseHead(status: .ok, shuttingDown: false) == nil)
        #expect(kept.exchange?.keepAlive == true)

        for status in [HTTPStatus.badRequest, .requestTimeout, .payloadTooLarge, .uriTooLong, HTTPStatus(code: 429), .headersTooLarge,
                       .httpVersionNotSupported] {
            var closing = Self.responding(keepAlive: true)
            #expect(closing.responseHead(status: status, shuttingDown: false) == "close", "\(status.code)")
            #expect(closing.exchange?.keepAlive == false)
        }
        var stopping = Self.responding(keepAlive: true)
        #expect(stopping.responseHead(status: .ok, shuttingDown: true) == "close")
        var asked = Self.responding(keepAlive: false)
        #expect(asked.responseHead(status: .ok, shuttingDown: false) == "close")

        var http10 = ConnectionState(now: 0)
        var exchange = Self.exchange()
        exchange = ConnectionState.Exchange(method: .get, path: "/x", route: "/x", requestID: "id", version: .http1_0, startedAt: 0, keepAlive: true)
        http10.refuseBeforeBody(exchange, bodyFollows: false)
        #expect(http10.responseHead(status: .notFound, shuttingDown: false) == "keep-alive")
    }

    /// A refusal before the body is read keeps the connection only when no body follows: an unread
    /// body's bytes would be read as the next request.
    @Test func aRefusalBeforeAnUnreadBodyCloses() {
        var withBody = ConnectionState(now: 0)
        withBody.refuseBeforeBody(Self.exchange(), bodyFollows: true)
        #expect(withBody.exchange?.keepAlive == false)
        var without = ConnectionState(now: 0)
        without.refuseBeforeBody(Self.exchange(), bodyFollows: false)
        #expect(without.exchange?.keepAlive == true)
        var closing = ConnectionState(now: 0)
        closing.refuseAndClose(Self.exchange())
        #expect(closing.exchange?.keepAlive == false)
    }

    /// A connection beyond its peer's cap is served one request, then closed, whatever the
    /// request asked; that request's head must come within the over-cap timeout (1 s), idle (then
    /// it is reset) or arriving.
    @Test func aConnectionOverItsPeersCapServesOneRequestAndWaitsLittleForIt() throws {
        var over = ConnectionState(now: 0, overConnectionCap: true)
        #expect(sweep(over, at: Self.second / 2) == "none")
        // Nothing asked in its time: reset, not closed in order (`Connection.abort`); at shutdown
        // it closes like any idle connection.
        #expect(sweep(over, at: Self.second + 1) == "reset")
        #expect(sweep(over, at: Self.second / 2, shuttingDown: true) == "close")
        var slow = ConnectionState(now: 0, overConnectionCap: true)
        slow.headBytesBuffered(now: Self.second / 2)
        #expect(sweep(slow, at: Self.second) == "none")
        #expect(sweep(slow, at: 2 * Self.second) == "408")
        _ = over.handle(try Self.pending(since: 0), keepAlive: true)
        #expect(over.responseHead(status: .ok, shuttingDown: false) == "close")
        #expect(over.exchange?.keepAlive == false)
        let under = ConnectionState(now: 0)
        #expect(sweep(under, at: 11 * Self.second) == "none")
    }

    /// A body that waits for room in the server's body budget is answered `503` when the wait
    /// passes its bound (the body timeout does not run meanwhile); once room is made, the body
    /// timeout starts from then.
    @Test func aBodyWaitingForTheBudgetGivesUpAfterItsWait() throws {
        var waiting = ConnectionState(now: 0)
        waiting.awaitBody(try Self.pending(since: 0))
        waiting.waitForBodyBudget(now: Self.second)
        #expect(waiting.waitsForBodyBudget)
        #expect(sweep(waiting, at: 5 * Self.second) == "none")
        #expect(sweep(waiting, at: 7 * Self.second) == "503 body budget")
        var granted = waiting
        granted.bodyBudgetGranted(now: 4 * Self.second)
        #expect(!granted.waitsForBodyBudget)
        #expect(sweep(granted, at: 33 * Self.second) == "none")
        #expect(sweep(granted, at: 35 * Self.second) == "408 with exchange")
    }
}
