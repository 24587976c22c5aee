import Dispatch
import Foundation
import Synchronization

/// A fixed number of connections shared by the threads that serve requests. A borrower waits a
/// bounded time for a connection (then gets `poolTimeout`, which the service answers `503`), a
/// connection that broke is dropped and replaced on the next borrow, and `shutdown` closes all.
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
        /// libpq's `connect_timeout` for each new connection, in seconds.
        public var connectTimeoutSeconds: Int

        public init(connectionString: String, size: Int = 8, acquireTimeout: Duration = .seconds(2), connectTimeoutSeconds: Int = 3) {
            self.connectionString = connectionString
            self.size = max(1, size)
            self.acquireTimeout = acquireTimeout
            self.connectTimeoutSeconds = connectTimeoutSeconds
        }
    }

    private struct State {
        var idle: [PostgresConnection] = []
        var open = 0
        var closed = false
    }

    /// The pool's configuration.
    public let configuration: Configuration
    private let slots: DispatchSemaphore
    private let state = Mutex(State())
    private let inUse = Atomic<Int>(0)

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.slots = DispatchSemaphore(value: configuration.size)
    }

    /// Connections borrowed right now (`adtally_db_pool_connections_in_use`).
    public var connectionsInUse: Int { inUse.load(ordering: .relaxed) }

    /// Connections open right now, idle or borrowed (`adtally_db_pool_connections`).
    public var connectionsOpen: Int { state.withLock { $0.open } }

    /// Borrows a connection for the duration of `body`. A connection that is unusable afterwards
    /// (the server closed it, or it was left inside a transaction) is closed instead of returned.
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    /// `withConnection` plus a transaction around `body`.
    public func transaction<T>(isolation: PostgresConnection.IsolationLevel = .readCommitted, _ body: (PostgresConnection) throws -> T) throws -> T {
        try withConnection { connection in
            try connection.transaction(isolation: isolation, body)
        }
    }

    /// Closes idle connections now and every borrowed one when it comes back; later borrowers get
    /// `poolClosed`. Safe to call more than once.
    public func shutdown() {
        let idle = state.withLock { state -> [PostgresConnection] in
            state.closed = true
            let idle = state.idle
            state.open -= idle.count
            state.idle = []
            return idle
        }
        idle.forEach { $0.close() }
    }

    private func acquire() throws -> PostgresConnection {
        if state.withLock({ $0.closed }) {
            throw PostgresError(kind: .poolClosed, message: "the database pool is shut down")
        }
        let nanoseconds = configuration.acquireTimeout.components.seconds * 1_000_000_000
            + configuration.acquireTimeout.components.attoseconds / 1_000_000_000
        guard slots.wait(timeout: .now() + .nanoseconds(Int(nanoseconds))) == .success else {
            throw PostgresError(kind: .poolTimeout, message: "no database connection free within \(configuration.acquireTimeout)")
        }
        // From here on the slot is ours and must be given back on every path that does not lend it.
        while true {
            enum Next { case closed, reuse(PostgresConnection), open }
            let next: Next = state.withLock { state in
                if state.closed { return .closed }
                if let connection = state.idle.popLast() { return .reuse(connection) }
                state.open += 1
                return .open
            }
            switch next {
            case .closed:
                slots.signal()
                throw PostgresError(kind: .poolClosed, message: "the database pool is shut down")
            case .reuse(let connection):
                if connection.isUsable {
                    inUse.add(1, ordering: .relaxed)
                    return connection
                }
                connection.close()
                state.withLock { $0.open -= 1 }
            case .open:
                do {
                    let connection = try PostgresConnection(
                        connectionString: configuration.connectionString,
                        connectTimeoutSeconds: configuration.connectTimeoutSeconds
                    )
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

    private func release(_ connection: PostgresConnection) {
        inUse.subtract(1, ordering: .relaxed)
        let keep = connection.isUsable
        let closeIt = state.withLock { state -> Bool in
            if state.closed || !keep {
                state.open -= 1
                return true
            }
            state.idle.append(connection)
            return false
        }
        if closeIt { connection.close() }
        slots.signal()
    }
}
