import Dispatch
import Foundation
import Synchronization

/// A fixed number of connections shared by the threads that serve requests. A borrower waits a
/// bounded time for a connection (then gets `poolTimeout`, which the service answers `503`), a
/// connection that broke is dropped and replaced on the next borrow, and `shutdown` closes all.
///
/// Some connections may be held back for the borrowers that must never be starved (AdTally's
/// group-commit committers, `Borrower.reserved`): the others (`.shared`: readiness probes, reports,
/// feeds, maintenance) together hold at most `size - reservedConnections` connections, so however
/// many of them wait, a reserved borrower finds a connection at once.
///
/// Connections are opened lazily, so a process can start while the database is down and serve
/// `503` until it is back.
public final class PostgresPool: Sendable {
    /// How the pool reaches and sizes its connections.
    public struct Configuration: Sendable {
        /// libpq connection string or URI.
        public var connectionString: String
        /// Number of connections at most (`ADTALLY_DB_POOL_SIZE`).
        public var size: Int
        /// How long a borrower waits for a free connection.
        public var acquireTimeout: Duration
        /// libpq's `connect_timeout` for each new connection, in seconds (libpq applies it to each
        /// host of a multi-host string in turn).
        public var connectTimeoutSeconds: Int
        /// Whether statements are prepared once per connection (`ADTALLY_DB_PREPARED_STATEMENTS`):
        /// off behind a pooler in transaction mode.
        public var usePreparedStatements: Bool
        /// How long a statement may wait for the server's answer before its connection is given up
        /// (`PostgresConnection.answerTimeout`); a borrower may ask for another bound.
        public var answerTimeout: Duration?
        /// libpq parameters that the connection string may override (keepalives; for the primary,
        /// `target_session_attrs=read-write`).
        public var parameterDefaults: [(String, String)]
        /// libpq parameters that override the connection string's (a Citus node's `host` and `port`).
        public var parameterOverrides: [(String, String)] = []
        /// Connections that `.shared` borrowers cannot take: only `.reserved` ones may use the last
        /// `reservedConnections` of the pool. At most `size - 1` (shared borrowers keep one).
        public var reservedConnections: Int

        public init(connectionString: String, size: Int = 8, acquireTimeout: Duration = .seconds(2), connectTimeoutSeconds: Int = 3,
                    usePreparedStatements: Bool = true, answerTimeout: Duration? = nil,
                    parameterDefaults: [(String, String)] = PostgresConnection.keepaliveDefaults, reservedConnections: Int = 0) {
            self.connectionString = connectionString
            self.size = max(1, size)
            self.reservedConnections = min(max(0, reservedConnections), self.size - 1)
            self.acquireTimeout = acquireTimeout
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.usePreparedStatements = usePreparedStatements
            self.answerTimeout = answerTimeout
            self.parameterDefaults = parameterDefaults
        }
    }

    /// A connection and the generation it was opened in.
    private struct Pooled {
        let connection: PostgresConnection
        let generation: UInt64
    }

    private struct State {
        var idle: [Pooled] = []
        /// The generation of each borrowed connection, by identity.
        var lent: [ObjectIdentifier: UInt64] = [:]
        var open = 0
        var closed = false
        /// Grows each time a connection lost its server (`hasLostItsServer`). Connections of an
        /// older generation are closed rather than lent again: they were opened to the server that
        /// just died, hung or became a standby, and the next connection libpq opens goes to whichever
        /// server is the primary now.
        var generation: UInt64 = 0
    }

    /// Who borrows a connection.
    public enum Borrower: Sendable {
        /// Any borrower: together they hold at most `size - reservedConnections` connections.
        case shared
        /// A borrower the connections are held back for (group commit's committers): it may take
        /// any free connection, the reserved ones included.
        case reserved
    }

    /// The pool's configuration.
    public let configuration: Configuration
    private let slots: DispatchSemaphore
    /// The slots `.shared` borrowers may hold, taken before a slot of `slots`; nil when nothing is
    /// reserved.
    private let sharedSlots: DispatchSemaphore?
    private let state = Mutex(State())
    private let inUse = Atomic<Int>(0)

    /// A pool to another server of a cluster (a Citus node): this pool's settings, with `host` and
    /// `port` over its connection string's, `size` connections, none held back.
    public func sibling(host: String, port: Int, size: Int) -> PostgresPool {
        var configuration = self.configuration
        configuration.size = max(1, size)
        configuration.reservedConnections = 0
        configuration.parameterOverrides = [("host", host), ("port", String(port))]
        return PostgresPool(configuration: configuration)
    }

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.slots = DispatchSemaphore(value: configuration.size)
        let reserved = configuration.reservedConnections
        self.sharedSlots = reserved > 0 ? DispatchSemaphore(value: configuration.size - reserved) : nil
    }

    /// Connections borrowed right now (`adtally_db_pool_connections_in_use`).
    public var connectionsInUse: Int { inUse.load(ordering: .relaxed) }

    /// Connections open right now, idle or borrowed (`adtally_db_pool_connections`).
    public var connectionsOpen: Int { state.withLock { $0.open } }

    /// Borrows a connection for the duration of `body`. A connection that is unusable afterwards
    /// (the server closed it, or it was left inside a transaction) is closed instead of returned;
    /// one that lost its server also retires every idle connection opened before it.
    /// `answerTimeout` replaces the pool's bound for this borrow (a probe wants a shorter one, a
    /// report a longer one). `borrower` says whether the reserved connections may be taken.
    public func withConnection<T>(for borrower: Borrower = .shared, answerTimeout: Duration? = nil,
                                  _ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire(borrower)
        connection.answerTimeout = answerTimeout ?? configuration.answerTimeout
        defer { release(connection, borrower) }
        return try body(connection)
    }

    /// How many times a connection lost its server (the pool's generation), for tests and logs.
    public var serverLosses: UInt64 { state.withLock { $0.generation } }

    /// `withConnection` run again on another connection while `retry` accepts its error (a
    /// connection that broke in use, a standby's recovery conflict): the unit of work is the
    /// borrow, not a transaction.
    public func withConnection<T>(answerTimeout: Duration? = nil, retry: RetryPolicy, _ body: (PostgresConnection) throws -> T) throws -> T {
        try retry.run { try withConnection(answerTimeout: answerTimeout, body) }
    }

    /// `withConnection` plus a transaction around `body` (`PostgresConnection.withTransaction`).
    public func withTransaction<T>(_ options: TransactionOptions = .readWrite, retry: RetryPolicy = .never,
                                   _ body: (PostgresTransaction) throws -> T) throws -> T {
        try withConnection { connection in
            try connection.withTransaction(options, retry: retry, body)
        }
    }

    /// Closes idle connections now and every borrowed one when it comes back; later borrowers get
    /// `poolClosed`. Safe to call more than once.
    public func shutdown() {
        let idle = state.withLock { state -> [Pooled] in
            state.closed = true
            let idle = state.idle
            state.open -= idle.count
            state.idle = []
            return idle
        }
        idle.forEach { $0.connection.close() }
    }

    private func acquire(_ borrower: Borrower) throws -> PostgresConnection {
        if state.withLock({ $0.closed }) {
            throw PostgresError(kind: .poolClosed, message: "the database pool is shut down")
        }
        let deadline = DispatchTime.now() + configuration.acquireTimeout.dispatchInterval
        // A shared borrower first takes one of the slots shared borrowers may hold, then a
        // connection's slot: so that shared borrowers never hold the reserved ones.
        let shared = borrower == .shared ? sharedSlots : nil
        if let shared, shared.wait(timeout: deadline) != .success {
            throw PostgresError(kind: .poolTimeout, message: "no database connection free within \(configuration.acquireTimeout)")
        }
        guard slots.wait(timeout: deadline) == .success else {
            shared?.signal()
            throw PostgresError(kind: .poolTimeout, message: "no database connection free within \(configuration.acquireTimeout)")
        }
        do {
            return try lend()
        } catch {
            shared?.signal()
            throw error
        }
    }

    /// With a slot taken: an idle connection or a new one. Gives the slot back when it throws.
    private func lend() throws -> PostgresConnection {
        // From here on the slot is ours and must be given back on every path that does not lend it.
        while true {
            enum Next { case closed, reuse(PostgresConnection), retire(PostgresConnection), open(UInt64) }
            let next: Next = state.withLock { state in
                if state.closed { return .closed }
                if let pooled = state.idle.popLast() {
                    guard pooled.generation == state.generation else {
                        state.open -= 1
                        return .retire(pooled.connection)
                    }
                    state.lent[ObjectIdentifier(pooled.connection)] = pooled.generation
                    return .reuse(pooled.connection)
                }
                state.open += 1
                return .open(state.generation)
            }
            switch next {
            case .closed:
                slots.signal()
                throw PostgresError(kind: .poolClosed, message: "the database pool is shut down")
            case .retire(let connection):
                connection.close()
            case .reuse(let connection):
                if connection.isUsable {
                    inUse.add(1, ordering: .relaxed)
                    return connection
                }
                let lost = connection.hasLostItsServer
                connection.close()
                let retired = state.withLock { state -> [Pooled] in
                    state.open -= 1
                    state.lent[ObjectIdentifier(connection)] = nil
                    return lost ? Self.retireIdle(&state) : []
                }
                retired.forEach { $0.connection.close() }
            case .open(let generation):
                do {
                    let connection = try PostgresConnection(
                        connectionString: configuration.connectionString,
                        connectTimeoutSeconds: configuration.connectTimeoutSeconds,
                        usePreparedStatements: configuration.usePreparedStatements,
                        answerTimeout: configuration.answerTimeout,
                        parameterDefaults: configuration.parameterDefaults,
                        parameterOverrides: configuration.parameterOverrides
                    )
                    state.withLock { $0.lent[ObjectIdentifier(connection)] = generation }
                    inUse.add(1, ordering: .relaxed)
                    return connection
                } catch {
                    state.withLock { $0.open -= 1 }
                    slots.signal()
                    throw error
                }
            }
        }
    }

    private func release(_ connection: PostgresConnection, _ borrower: Borrower) {
        inUse.subtract(1, ordering: .relaxed)
        let keep = connection.isUsable
        let lost = !keep && connection.hasLostItsServer
        let (closeIt, retired) = state.withLock { state -> (Bool, [Pooled]) in
            let generation = state.lent.removeValue(forKey: ObjectIdentifier(connection)) ?? state.generation
            let retired = lost && generation == state.generation ? Self.retireIdle(&state) : []
            if state.closed || !keep || generation != state.generation {
                state.open -= 1
                return (true, retired)
            }
            state.idle.append(Pooled(connection: connection, generation: generation))
            return (false, retired)
        }
        if closeIt { connection.close() }
        retired.forEach { $0.connection.close() }
        slots.signal()
        if borrower == .shared { sharedSlots?.signal() }
    }

    /// A connection of the current generation lost its server: starts a new generation and takes
    /// the idle connections out (the caller closes them outside the lock). Borrowed ones of the old
    /// generation are closed when they come back.
    private static func retireIdle(_ state: inout State) -> [Pooled] {
        state.generation += 1
        let idle = state.idle
        state.idle = []
        state.open -= idle.count
        return idle
    }
}
