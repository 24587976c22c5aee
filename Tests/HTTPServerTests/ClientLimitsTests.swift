import HTTP
@testable import HTTPServer
import Synchronization
import Testing

/// The limits per client of API.md section 6 at their boundaries, on clocks the test moves.
@Suite(.timeLimit(.minutes(3))) struct ClientLimitsTests {
    /// Monotonic nanoseconds and Unix seconds that move only when told to.
    final class FixedClock: Sendable {
        let nanoseconds = Atomic<UInt64>(1_000_000_000)
        let seconds = Atomic<Int64>(1_796_000_000)  // 2026-11-30T03:33:20Z: 20 s into a minute

        var clock: ClientLimits.Clock {
            ClientLimits.Clock(monotonicNanoseconds: { self.nanoseconds.load(ordering: .relaxed) },
                               unixSeconds: { self.seconds.load(ordering: .relaxed) })
        }

        func advance(seconds delta: Double) {
            nanoseconds.add(UInt64(delta * 1e9), ordering: .relaxed)
            seconds.add(Int64(delta.rounded(.down)), ordering: .relaxed)
        }
    }

    static func address(_ text: String) -> IPAddress { IPAddress(text) ?? IPAddress(value: 0) }

    /// A request's context from `peer`, with `X-Forwarded-For` values when given.
    static func context(_ route: String = "/v1/events", peer: String? = "192.0.2.1", forwarded: [String] = [],
                        overCap: Bool = false) throws -> RequestContext {
        var head = "POST \(route) HTTP/1.1\r\nHost: t\r\n"
        for value in forwarded { head += "X-Forwarded-For: \(value)\r\n" }
        head += "\r\n"
        guard case .complete(let request, _) = HTTPRequestParser().parse(Array(head.utf8)) else {
            throw HTTPError(.badRequest, code: "test", message: "the test's head does not parse")
        }
        return RequestContext(request: request, route: route, parameters: [:], requestID: "t", peer: peer.map(address),
                              overConnectionCap: overCap)
    }

    /// What a check threw: the status and `Retry-After`, or nil when it passed.
    static func refusal(_ check: () throws -> Void) -> (status: Int, retryAfter: String?)? {
        do {
            try check()
            return nil
        } catch let error as HTTPError {
            return (error.status.code, error.headers.first { $0.0 == "Retry-After" }?.1)
        } catch {
            return (0, nil)
        }
    }

    final class Warnings: Sendable {
        let lines = Mutex<[String]>([])
        func warn(_ client: IPAddress, _ limit: ClientLimits.Limit) { lines.withLock { $0.append("\(client) \(limit.rawValue)") } }
    }

    @Test func theTableForgetsTheLeastRecentlySeenAddress() {
        var table = ClientTable(capacity: 3)
        let fresh = { ClientState(tokens: 5, refilledAt: 0) }
        for text in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] { table.update(Self.address(text), fresh: fresh) { $0.tokens -= 1 } }
        table.update(Self.address("10.0.0.1"), fresh: fresh) { $0.tokens -= 1 }   // seen again: now the newest
        table.update(Self.address("10.0.0.4"), fresh: fresh) { _ in }             // forgets 10.0.0.2
        #expect(table.count == 3)
        #expect(!table.contains(Self.address("10.0.0.2")))
        #expect(table.peek(Self.address("10.0.0.1"))?.tokens == 3)
        #expect(table.peek(Self.address("10.0.0.3"))?.tokens == 4)
        #expect(table.peek(Self.address("10.0.0.4"))?.tokens == 5)
        // A forgotten address starts again with what `fresh` gives.
        table.update(Self.address("10.0.0.2"), fresh: fresh) { _ in }
        #expect(table.peek(Self.address("10.0.0.2"))?.tokens == 5)
        #expect(!table.contains(Self.address("10.0.0.3")))
        // Many more addresses than the capacity: still three.
        for n in 0..<1_000 { table.update(IPAddress(ipv4: UInt32(n)), fresh: fresh) { _ in } }
        #expect(table.count == 3)
    }

    /// A bucket of 20 refilled at 10 a second, on a clock that moves only when told to.
    @Test func theEventsBucketRefillsAtItsRateUpToItsSize() throws {
        let time = FixedClock()
        let warnings = Warnings()
        let limits = ClientLimits(settings: .init(eventsPerSecond: 10, eventBurst: 20), resolver: ClientAddressResolver(trusted: AddressRanges()),
                                  clock: time.clock, warn: warnings.warn)
        let request = try Self.context()
        // A batch of 20 takes the whole bucket: 1 at the head, 19 from the body.
        #expect(Self.refusal { try limits.admitEvents(request) } == nil)
        #expect(Self.refusal { try limits.chargeEvents(request, events: 20) } == nil)
        // Empty: refused from the head, before any body; a tenth of a second refills one event.
        let empty = try #require(Self.refusal { try limits.admitEvents(request) })
        #expect(empty.status == 429 && empty.retryAfter == "1")
        time.advance(seconds: 0.1)
        #expect(Self.refusal { try limits.admitEvents(request) } == nil)
        #expect(Self.refusal { try limits.chargeEvents(request, events: 1) } == nil)
        #expect(Self.refusal { try limits.admitEvents(request) }?.status == 429)
        // Half a second: 5 events. A batch of 20 does not fit: refused with the seconds until 20
        // are there (1.5 s, said as 2), and nothing charged: its head's event is given back.
        time.advance(seconds: 0.5)
        #expect(Self.refusal { try limits.admitEvents(request) } == nil)
        let short = try #require(Self.refusal { try limits.chargeEvents(request, events: 20) })
        #expect(short.status == 429 && short.retryAfter == "2")
        #expect(Self.refusal { try limits.admitEvents(request) } == nil)
        #expect(Self.refusal { try limits.chargeEvents(request, events: 5) } == nil)
        #expect(Self.refusal { try limits.admitEvents(request) }?.status == 429, "5 events were there, and 5 were taken")
        // A long pause fills the bucket to its size, no further; a request larger than the bucket
        // costs the bucket's size.
        time.advance(seconds: 60)
        #expect(Self.refusal { try limits.admitEvents(request) } == nil)
        #expect(Self.refusal { try limits.chargeEvents(request, events: 500) } == nil)
        #expect(Self.refusal { try limits.admitEvents(request) }?.status == 429)
        // Another address has a bucket of its own.
        #expect(Self.refusal { try limits.admitEvents(try Self.context(peer: "192.0.2.2")) } == nil)
        // A request made in process (no peer) is not limited.
        #expect(Self.refusal { try limits.admitEvents(try Self.context(peer: nil)) } == nil)
        #expect(limits.refusals(.events) == 5)
        // One warning per address and minute, whatever the refusals; the first minute had two
        // (the clock moved 60 s), each naming the address and the limit.
        #expect(warnings.lines.withLock { $0 } == ["192.0.2.1 events", "192.0.2.1 events"])
    }

    /// `mightRefuse` says whether a body's charge could fail, and takes nothing: a bucket that
    /// holds the rest of the largest batch needs no price before the decode, one that does not does.
    @Test func mightRefuseJudgesTheBucketWithoutChargingIt() throws {
        let time = FixedClock()
        let limits = ClientLimits(settings: .init(eventsPerSecond: 10, eventBurst: 1_000), resolver: ClientAddressResolver(trusted: AddressRanges()),
                                  clock: time.clock)
        let request = try Self.context()
        let client = { limits.client(request) }
        // Never seen: a full bucket.
        #expect(!limits.mightRefuse(events: 500, client: client))
        #expect(Self.refusal { try limits.admitEvents(request) } == nil)
        #expect(!limits.mightRefuse(events: 500, client: client), "999 left: the rest of 500 fits")
        #expect(Self.refusal { try limits.chargeEvents(request, events: 700) } == nil)
        // 300 left (the head took 1): a batch of 500 may not fit, one of 300 does (its head took 1).
        #expect(Self.refusal { try limits.admitEvents(request) } == nil)
        #expect(limits.mightRefuse(events: 500, client: client))
        #expect(!limits.mightRefuse(events: 300, client: client))
        #expect(!limits.mightRefuse(events: 1, client: client), "a single event's head paid for it")
        // Asking took nothing: exactly the 299 more still fit, and then nothing does.
        for _ in 0..<3 { _ = limits.mightRefuse(events: 500, client: client) }
        #expect(Self.refusal { try limits.chargeEvents(request, events: 300) } == nil)
        #expect(Self.refusal { try limits.admitEvents(request) }?.status == 429)
        // The refill counts: a second later 10 are there.
        time.advance(seconds: 1)
        #expect(limits.mightRefuse(events: 12, client: client))
        #expect(!limits.mightRefuse(events: 11, client: client))
        // Off, or no client: never.
        let off = ClientLimits(settings: .init(eventsPerSecond: 0), resolver: ClientAddressResolver(trusted: AddressRanges()), clock: time.clock)
        #expect(!off.mightRefuse(events: 500, client: client))
        #expect(!limits.mightRefuse(events: 500, client: { nil }))
    }

    @Test func theClientBehindATrustedProxyHasTheBucketNotTheProxy() throws {
        let limits = ClientLimits(settings: .init(eventsPerSecond: 1, eventBurst: 2),
                                  resolver: ClientAddressResolver(trusted: try AddressRanges.parse(list: "10.0.0.0/8")),
                                  clock: FixedClock().clock)
        let first = try Self.context(peer: "10.0.0.1", forwarded: ["198.51.100.1"])
        let second = try Self.context(peer: "10.0.0.1", forwarded: ["198.51.100.2, 10.0.0.9"])
        for _ in 0..<2 {
            #expect(Self.refusal { try limits.admitEvents(first) } == nil)
            #expect(Self.refusal { try limits.admitEvents(second) } == nil)
        }
        #expect(Self.refusal { try limits.admitEvents(first) }?.status == 429)
        #expect(Self.refusal { try limits.admitEvents(second) }?.status == 429)
        // An untrusted peer's header is ignored: the peer is the client.
        let untrusted = try Self.context(peer: "203.0.113.5", forwarded: ["198.51.100.3"])
        for _ in 0..<2 { #expect(Self.refusal { try limits.admitEvents(untrusted) } == nil) }
        #expect(Self.refusal { try limits.admitEvents(try Self.context(peer: "203.0.113.5", forwarded: ["198.51.100.4"])) }?.status == 429)
    }

    @Test func failedAuthBeyondItsLimitRefusesTheRestOfTheMinute() throws {
        let time = FixedClock()
        let limits = ClientLimits(settings: .init(authFailuresPerMinute: 3), resolver: ClientAddressResolver(trusted: AddressRanges()),
                                  clock: time.clock)
        let request = try Self.context("/v1/reports/ads")
        for _ in 0..<3 {
            #expect(Self.refusal { try limits.checkAuthThrottle(request) } == nil)
            limits.recordAuthFailure(request)
        }
        // Three 401s are allowed; the fourth goes over.
        #expect(Self.refusal { try limits.checkAuthThrottle(request) } == nil)
        limits.recordAuthFailure(request)
        let refused = try #require(Self.refusal { try limits.checkAuthThrottle(request) })
        // 20 s into the minute: 40 s left.
        #expect(refused.status == 429 && refused.retryAfter == "40")
        time.advance(seconds: 39)
        #expect(Self.refusal { try limits.checkAuthThrottle(request) }?.retryAfter == "1")
        #expect(Self.refusal { try limits.checkAuthThrottle(try Self.context("/v1/reports/ads", peer: "192.0.2.9")) } == nil)
        // The next UTC minute starts clean.
        time.advance(seconds: 1)
        #expect(Self.refusal { try limits.checkAuthThrottle(request) } == nil)
        #expect(limits.refusals(.auth) == 2)
        #expect(ClientLimits.minute(of: -1) == -1 && ClientLimits.minute(of: 59) == 0 && ClientLimits.minute(of: 60) == 1)
    }

    @Test func aConnectionOverTheCapIsRefused() throws {
        let limits = ClientLimits(settings: .init(), resolver: ClientAddressResolver(trusted: AddressRanges()), clock: FixedClock().clock)
        for route in ["/v1/events", "/v1/reports/ads", "/dashboard"] {
            let refused = Self.refusal { try limits.admitConnection(try Self.context(route, overCap: true)) }
            #expect(refused?.status == 429 && refused?.retryAfter == "1", "\(route)")
            #expect(Self.refusal { try limits.admitConnection(try Self.context(route)) } == nil, "\(route)")
        }
        #expect(limits.refusals(.connections) == 3)
    }

    @Test func zeroTurnsALimitOffAndTheTableIsBounded() throws {
        let off = ClientLimits(settings: .init(eventsPerSecond: 0, eventBurst: 1, authFailuresPerMinute: 0),
                               resolver: ClientAddressResolver(trusted: AddressRanges()), clock: FixedClock().clock)
        let request = try Self.context()
        for _ in 0..<100 {
            #expect(Self.refusal { try off.admitEvents(request) } == nil)
            #expect(Self.refusal { try off.chargeEvents(request, events: 500) } == nil)
            off.recordAuthFailure(request)
            #expect(Self.refusal { try off.checkAuthThrottle(request) } == nil)
        }
        #expect(off.trackedClients == 0)
        let bounded = ClientLimits(settings: .init(), resolver: ClientAddressResolver(trusted: AddressRanges()), clock: FixedClock().clock,
                                   capacity: 50)
        for n in 0..<500 { try bounded.admitEvents(try Self.context(peer: "10.0.\(n / 256).\(n % 256)")) }
        #expect(bounded.trackedClients == 50)
    }
}
