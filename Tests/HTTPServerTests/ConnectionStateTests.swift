import HTTP
@testable import HTTPServer
import Testing

/// The connection state machine without sockets: time is whatever the test says it is.
@Suite(.timeLimit(.minutes(3))) struct ConnectionStateTests {
    static let second: UInt64 = 1_000_000_000
    static let timeouts = ConnectionState.Timeouts(idle: 60 * second, headerRead: 10 * second, bodyRead: 30 * second,
                                                   write: 30 * second, linger: 2 * second)

    static func exchange(keepAlive: Bool = true) -> ConnectionState.Exchange {
        ConnectionState.Exchange(method: "GET", path: "/x", route: "/x", requestID: "id", version: .http1_1, startedAt: 0, keepAlive: keepAlive)
    }

    static func pending(since: UInt64) throws -> ConnectionState.PendingBody {
        guard case .complete(let head, _) = HTTPRequestParser().parseHead(Array("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n".utf8)) else {
            throw HTTPError(.badRequest, code: "test", message: "the test's head does not parse")
        }
        return ConnectionState.PendingBody(head: head, exchange: exchange(), handler: { _ in .text(.ok, "") }, nonBlocking: false,
                                           deferred: nil, parameters: [:], decoder: nil, since: since)
    }

    func sweep(_ state: ConnectionState, at now: UInt64, shuttingDown: Bool = false, unsentSince: UInt64? = nil) -> String {
        switch state.sweep(now: now, timeouts: Self.timeouts, shuttingDown: shuttingDown, unsentSince: unsentSince) {
        case .none: "none"
        case .close: "close"
        case .closeStalledWrite: "stalled"
        case .requestTimeout(_, let exchange): exchange == nil ? "408" : "408 with exchange"
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
        var s = ConnectionState(now: 0)
        s.respond(Self.exchange())
        // A handler that takes long has nothing unsent: no write timeout.
        #expect(sweep(s, at: 1000 * Self.second) == "none")
        #expect(sweep(s, at: 40 * Self.second, unsentSince: 10 * Self.second) == "none")
        #expect(sweep(s, at: 40 * Self.second + 1, unsentSince: 10 * Self.second) == "stalled")
    }

    @Test func afterAKeptAliveResponseTheConnectionIsIdleFromThen() {
        var s = ConnectionState(now: 0)
        s.respond(Self.exchange())
        #expect(s.responseSent(now: 7 * Self.second, keepAlive: true, shuttingDown: false, bufferEmpty: true) == .nextRequest)
        #expect(sweep(s, at: 67 * Self.second) == "none")
        #expect(sweep(s, at: 67 * Self.second + 1) == "close")
    }

    @Test func aClosingResponseLingersWhileInputMayStillArrive() {
        var s = ConnectionState(now: 0)
        s.respond(Self.exchange(keepAlive: false))
        #expect(s.responseSent(now: Self.second, keepAlive: false, shuttingDown: false, bufferEmpty: false) == .linger)
        #expect(s.isLingering)
        #expect(sweep(s, at: 3 * Self.second) == "none")
        #expect(sweep(s, at: 3 * Self.second + 1) == "close")
        // The peer's end is what lingering waits for.
        #expect(s.inputEnded() == .close)
    }

    @Test func aClosingResponseClosesAtOnceWhenNothingCanArrive() {
        var peerGone = ConnectionState(now: 0)
        peerGone.respond(Self.exchange())
        #expect(peerGone.inputEnded() == .stopReading)
        #expect(peerGone.responseSent(now: 1, keepAlive: false, shuttingDown: false, bufferEmpty: false) == .close)

        var shutdown = ConnectionState(now: 0)
        shutdown.respond(Self.exchange())
        #expect(shutdown.responseSent(now: 1, keepAlive: true, shuttingDown: true, bufferEmpty: true) == .close)
        var shutdownWithInput = ConnectionState(now: 0)
        shutdownWithInput.respond(Self.exchange())
        #expect(shutdownWithInput.responseSent(now: 1, keepAlive: true, shuttingDown: true, bufferEmpty: false) == .linger)
    }

    @Test func closingHappensOnce() {
        var s = ConnectionState(now: 0)
        var e = Self.exchange()
        let channel = StreamedBodyChannel(limit: 10)
        e.stream = channel
        s.respond(e)
        let first = s.close()
        #expect(first.wasOpen)
        #expect(first.stream === channel)
        #expect(!s.close().wasOpen)
        #expect(s.isClosed)
        #expect(sweep(s, at: 1000 * Self.second) == "none")
    }
}
