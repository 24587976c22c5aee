import Dispatch
import HTTP
import Runtime
import Synchronization

/// The limits per client of API.md section 6, keyed on the client address (`ClientAddressResolver`):
///
/// - **events**: a bucket of `eventBurst` events refilled at `eventsPerSecond`. A `POST /v1/events`
///   costs its number of events (a body that is not a batch, or not readable, costs 1), a request
///   larger than the bucket as much as the bucket. Its head takes 1 (`admitEvents`: an empty bucket
///   is answered `429` before the body is read), its body the rest (`chargeEvents`: when the bucket
///   holds less, the 1 is given back and the answer is `429`: nothing charged, nothing stored).
/// - **connections**: the connections of one TCP peer beyond `maxConnections` (counted by the
///   HTTP server, which marks their request) are answered `429` (`admit`), except for `/healthz`,
///   `/readyz` and `/metrics`, which are never limited.
/// - **auth**: an address with more than `authFailuresPerMinute` `401` answers in the current UTC
///   clock minute gets `429` on every later admin request of that minute (`checkAuthThrottle`).
///
/// Every `429` carries `Retry-After` (whole seconds, at least 1) and closes the connection (the
/// server's `ConnectionState`). Refusals are counted per limit (`refusals`, for
/// `adtally_http_rate_limited_total{limit}`) and logged once per address and minute, never once per
/// request: the line leaves through `warn`, which must not block (the IO queues call it).
///
/// At most `capacity` addresses are tracked (`ClientTable`, least recently seen forgotten); a request
/// without a known client address (made in process) is not limited.
public final class ClientLimits: Sendable {
    /// The limits, as configured (`0` turns one off).
    public struct Settings: Sendable, Equatable {
        public var eventsPerSecond: Int
        public var eventBurst: Int
        public var maxConnections: Int
        public var authFailuresPerMinute: Int

        public init(eventsPerSecond: Int = 1_000, eventBurst: Int = 20_000, maxConnections: Int = 1_000, authFailuresPerMinute: Int = 20) {
            self.eventsPerSecond = eventsPerSecond
            self.eventBurst = eventBurst
            self.maxConnections = maxConnections
            self.authFailuresPerMinute = authFailuresPerMinute
        }
    }

    /// Which limit refused a request: the `limit` label of `adtally_http_rate_limited_total`.
    public enum Limit: String, Sendable, CaseIterable {
        case events, connections, auth
    }

    /// The clocks the limits read: monotonic nanoseconds for the bucket, Unix seconds for the UTC
    /// minute of failed auth and of warnings. Tests give fixed ones.
    public struct Clock: Sendable {
        public var monotonicNanoseconds: @Sendable () -> UInt64
        public var unixSeconds: @Sendable () -> Int64

        public init(monotonicNanoseconds: @escaping @Sendable () -> UInt64, unixSeconds: @escaping @Sendable () -> Int64) {
            self.monotonicNanoseconds = monotonicNanoseconds
            self.unixSeconds = unixSeconds
        }

        public static let system = Clock(
            monotonicNanoseconds: { DispatchTime.now().uptimeNanoseconds },
            unixSeconds: { SystemClock().now().microsecondsSinceEpoch / 1_000_000 })
    }

    /// Addresses tracked at most per process.
    public static let defaultCapacity = 100_000

    public let settings: Settings
    let resolver: ClientAddressResolver
    private let clock: Clock
    private let table: Mutex<ClientTable>
    private let eventsRefused = Atomic<UInt64>(0)
    private let connectionsRefused = Atomic<UInt64>(0)
    private let authRefused = Atomic<UInt64>(0)
    private let warn: @Sendable (_ client: IPAddress, _ limit: Limit) -> Void

    /// `warn` logs the one line per address and minute; it is called on IO queues and must not block.
    public init(settings: Settings, resolver: ClientAddressResolver, clock: Clock = .system, capacity: Int = ClientLimits.defaultCapacity,
                warn: @escaping @Sendable (_ client: IPAddress, _ limit: Limit) -> Void = { _, _ in }) {
        self.settings = settings
        self.resolver = resolver
        self.clock = clock
        self.table = Mutex(ClientTable(capacity: capacity))
        self.warn = warn
    }

    /// Requests refused `429` by `limit` so far.
    public func refusals(_ limit: Limit) -> UInt64 {
        switch limit {
        case .events: eventsRefused.load(ordering: .relaxed)
        case .connections: connectionsRefused.load(ordering: .relaxed)
        case .auth: authRefused.load(ordering: .relaxed)
        }
    }

    /// Addresses tracked now (at most the capacity).
    public var trackedClients: Int { table.withLock { $0.count } }

    /// The client address of a request (nil: made in process, never limited).
    public func client(_ context: RequestContext) -> IPAddress? {
        resolver.client(peer: context.peer, headers: context.request.headers)
    }

    // MARK: - Connections

    /// A request on a connection beyond its peer's cap is refused (the product does not ask for
    /// the routes it never limits).
    public func admitConnection(_ context: RequestContext) throws {
        guard context.overConnectionCap else { return }
        if let peer = context.peer { refuse(peer, .connections) }
        throw Self.rateLimited(.connections, retryAfter: 1)
    }

    // MARK: - Events

    /// The events bucket's state now, refilled since it was last seen.
    private func refill(_ state: inout ClientState, now: UInt64) {
        let rate = Double(settings.eventsPerSecond)
        let burst = Double(settings.eventBurst)
        if now > state.refilledAt {
            state.tokens = min(burst, state.tokens + Double(now - state.refilledAt) * rate / 1e9)
        }
        state.refilledAt = now
    }

    private func fresh(now: UInt64) -> ClientState {
        ClientState(tokens: Double(settings.eventBurst), refilledAt: now)
    }

    /// Whole seconds until a bucket short of `missing` events holds them, at least 1.
    private func secondsToRefill(_ missing: Double) -> Int {
        let seconds = (missing / Double(settings.eventsPerSecond)).rounded(.up)
        return max(1, seconds.isFinite && seconds < 86_400 ? Int(seconds) : 86_400)
    }

    /// The head of a `POST /v1/events`: takes 1 event from the bucket, or refuses the request
    /// before its body is read when the bucket holds less (nothing taken).
    public func admitEvents(_ context: RequestContext) throws {
        guard settings.eventsPerSecond > 0, let client = client(context) else { return }
        let now = clock.monotonicNanoseconds()
        let retryAfter: Int? = table.withLock { table in
            table.update(client, fresh: { fresh(now: now) }) { state in
                refill(&state, now: now)
                guard state.tokens >= 1 else { return secondsToRefill(1 - state.tokens) }
                state.tokens -= 1
                return nil
            }
        }
        guard let retryAfter else { return }
        refuse(client, .events)
        throw Self.rateLimited(.events, retryAfter: retryAfter)
    }

    /// The body of a `POST /v1/events` said it holds `events` events (1 for a body that is not a
    /// batch or not readable): takes the rest of its cost (at most the bucket's size; the head took
    /// 1), or gives the head's event back and refuses the request.
    public func chargeEvents(_ context: RequestContext, events: Int) throws {
        try chargeEvents(events: events) { client(context) }
    }

    /// `chargeEvents` for a request whose client address the caller resolved already (`client`
    /// runs only when there is something to charge: never for a single event).
    public func chargeEvents(events: Int, client resolve: () -> IPAddress?) throws {
        guard settings.eventsPerSecond > 0 else { return }
        let cost = Double(min(max(events, 1), settings.eventBurst))
        guard cost > 1, let client = resolve() else { return }
        let now = clock.monotonicNanoseconds()
        let retryAfter: Int? = table.withLock { table in
            table.update(client, fresh: { fresh(now: now) }) { state in
                refill(&state, now: now)
                let rest = cost - 1
                guard state.tokens >= rest else {
                    state.tokens = min(Double(settings.eventBurst), state.tokens + 1)
                    return secondsToRefill(cost - state.tokens)
                }
                state.tokens -= rest
                return nil
            }
        }
        guard let retryAfter else { return }
        refuse(client, .events)
        throw Self.rateLimited(.events, retryAfter: retryAfter)
    }

    /// Whether the body's charge of a `POST /v1/events` of up to `events` events could be refused:
    /// the bucket (whose head took 1) holds less than the rest now. Charges nothing; the route then
    /// prices the body by a scan before it decodes it (`EventsRequest.cost(ofBody:)`).
    public func mightRefuse(events: Int, client resolve: () -> IPAddress?) -> Bool {
        guard settings.eventsPerSecond > 0 else { return false }
        let cost = Double(min(max(events, 1), settings.eventBurst))
        guard cost > 1, let client = resolve() else { return false }
        let now = clock.monotonicNanoseconds()
        guard var state = table.withLock({ $0.peek(client) }) else { return false }  // never seen: a full bucket
        refill(&state, now: now)  // a copy: the table is not touched
        return state.tokens < cost - 1
    }

    // MARK: - Failed admin auth

    /// Before an admin request's token is checked: refused for the rest of the UTC minute when its
    /// address earned more than `authFailuresPerMinute` `401`s in it, even with a right token.
    public func checkAuthThrottle(_ context: RequestContext) throws {
        guard settings.authFailuresPerMinute > 0, let client = client(context) else { return }
        let seconds = clock.unixSeconds()
        let minute = Self.minute(of: seconds)
        let failures = table.withLock { $0.peek(client) }.map { $0.authMinute == minute ? $0.authFailures : 0 } ?? 0
        guard failures > settings.authFailuresPerMinute else { return }
        refuse(client, .auth)
        throw Self.rateLimited(.auth, retryAfter: max(1, Int(60 - (seconds - minute * 60))))
    }

    /// An admin request was answered `401`.
    public func recordAuthFailure(_ context: RequestContext) {
        guard settings.authFailuresPerMinute > 0, let client = client(context) else { return }
        let minute = Self.minute(of: clock.unixSeconds())
        let now = clock.monotonicNanoseconds()
        table.withLock { table in
            table.update(client, fresh: { fresh(now: now) }) { state in
                if state.authMinute != minute {
                    state.authMinute = minute
                    state.authFailures = 0
                }
                state.authFailures += 1
            }
        }
    }

    /// The UTC clock minute of a Unix time (floored, also before 1970).
    static func minute(of seconds: Int64) -> Int64 {
        seconds >= 0 ? seconds / 60 : (seconds - 59) / 60
    }

    // MARK: - Refusals

    /// Counts a refusal and warns once per address and minute.
    private func refuse(_ client: IPAddress, _ limit: Limit) {
        switch limit {
        case .events: eventsRefused.add(1, ordering: .relaxed)
        case .connections: connectionsRefused.add(1, ordering: .relaxed)
        case .auth: authRefused.add(1, ordering: .relaxed)
        }
        let minute = Self.minute(of: clock.unixSeconds())
        let now = clock.monotonicNanoseconds()
        let first = table.withLock { table in
            table.update(client, fresh: { fresh(now: now) }) { state -> Bool in
                guard state.warnedMinute != minute else { return false }
                state.warnedMinute = minute
                return true
            }
        }
        if first { warn(client, limit) }
    }

    /// The `429` answer (API.md section 6).
    static func rateLimited(_ limit: Limit, retryAfter: Int) -> HTTPError {
        let message: String
        switch limit {
        case .events: message = "This client sent more events than its limit allows; nothing was stored. Retry after Retry-After seconds."
        case .connections: message = "This client holds too many open connections; reuse one, or retry after Retry-After seconds."
        case .auth: message = "Too many refused tokens from this client in this minute; retry after Retry-After seconds."
        }
        return HTTPError(ServerRefusal.rateLimited.status, code: ServerRefusal.rateLimited.code, message: message, headers: [("Retry-After", String(max(1, retryAfter)))])
    }
}

extension ClientLimits {
    /// Requests refused so far by each limit (every limit, zero included), in the metric's order.
    public var refusalsByLimit: [(limit: String, refusals: UInt64)] { Limit.allCases.map { ($0.rawValue, refusals($0)) } }
}
