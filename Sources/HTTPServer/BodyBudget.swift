import Synchronization

/// The bytes of request bodies that all connections together may hold in memory
/// (`ServerConfiguration.maxBufferedBodyBytes`): without it, 10,000 connections each buffering a
/// 1 MiB body (3 MiB chunked) for the 30 s body timeout hold 10-30 GiB.
///
/// A connection reserves its body's bytes before it reads them (the whole `Content-Length`, or a
/// chunked body step by step) and releases them when its response is written or it closes. A
/// reservation that does not fit waits in line, first come first served (so a large body is not
/// passed over forever by small ones): `release` grants waiting reservations in order while they
/// fit, and the connection is told on its own queue. A waiter that gives up (`cancel`) learns
/// whether its grant had already been made, so that no byte is ever lost from the account.
final class BodyBudget: Sendable {
    /// A reservation waiting for its turn.
    private struct Waiter {
        let ticket: UInt64
        let bytes: Int
        let granted: @Sendable () -> Void
    }

    private struct State {
        var used = 0
        var waiting: [Waiter] = []
        var nextTicket: UInt64 = 0
        /// Tickets granted by `release` whose connection has not yet taken the grant.
        var granted: Set<UInt64> = []
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Bytes reserved now (the `adtally_http_buffered_body_bytes` gauge).
    var used: Int { state.withLock { $0.used } }

    /// What `reserve` decided.
    enum Reservation: Equatable {
        /// The bytes are the caller's until it releases them.
        case reserved
        /// Not now: `granted` will be called (from whichever thread releases) once the bytes are
        /// the caller's; `cancel(ticket)` gives up.
        case waiting(ticket: UInt64)
    }

    /// Reserves `bytes` now if they fit and nobody waits before, else queues the reservation.
    func reserve(_ bytes: Int, granted: @escaping @Sendable () -> Void) -> Reservation {
        state.withLock { state in
            if state.waiting.isEmpty, state.used + bytes <= limit {
                state.used += bytes
                return .reserved
            }
            state.nextTicket += 1
            state.waiting.append(Waiter(ticket: state.nextTicket, bytes: bytes, granted: granted))
            return .waiting(ticket: state.nextTicket)
        }
    }

    /// The grant of `ticket` arrived at its connection: its bytes are the connection's now. False
    /// when the ticket was cancelled before (nothing to take).
    func take(_ ticket: UInt64) -> Bool {
        state.withLock { $0.granted.remove(ticket) != nil }
    }

    /// Gives up a waiting reservation. True when it had been granted meanwhile: the caller holds
    /// its bytes and must release them.
    func cancel(_ ticket: UInt64) -> Bool {
        state.withLock { state in
            if state.granted.remove(ticket) != nil { return true }
            state.waiting.removeAll { $0.ticket == ticket }
            return false
        }
    }

    /// Gives back `bytes` and grants the waiting reservations that now fit, in order.
    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        let wake = state.withLock { state -> [@Sendable () -> Void] in
            state.used = max(0, state.used - bytes)
            var wake: [@Sendable () -> Void] = []
            while let first = state.waiting.first, state.used + first.bytes <= limit {
                state.waiting.removeFirst()
                state.used += first.bytes
                state.granted.insert(first.ticket)
                wake.append(first.granted)
            }
            return wake
        }
        for granted in wake { granted() }
    }
}

/// Open connections per TCP peer, for `ServerConfiguration.maxConnectionsPerPeer`. Its size is
/// bounded by the open connections (a peer leaves the table with its last connection).
final class PeerConnections: Sendable {
    private let counts = Mutex<[IPAddress: Int]>([:])

    /// Counts a connection of `peer` and returns how many it has open now.
    func opened(_ peer: IPAddress) -> Int {
        counts.withLock { counts in
            let count = counts[peer, default: 0] + 1
            counts[peer] = count
            return count
        }
    }

    /// A connection of `peer` closed.
    func closed(_ peer: IPAddress) {
        counts.withLock { counts in
            guard let count = counts[peer] else { return }
            counts[peer] = count > 1 ? count - 1 : nil
        }
    }

    /// Connections open now from `peer` (tests).
    func count(of peer: IPAddress) -> Int { counts.withLock { $0[peer, default: 0] } }
}
