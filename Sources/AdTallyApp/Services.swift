import AdTally
import HTTPServer
import Postgres

// The parts of `adtally serve` as services of its `ServiceGroup`, in the order they start.

/// The database pools: they connect on first use, and close at the end, after everything that
/// borrows from them has stopped.
struct DatabasePools: Service {
    let primary: PostgresPool
    let reports: PostgresPool?
    /// The advertiser keys' poll's one connection.
    let keys: PostgresPool

    var name: String { "database pools" }

    func start() throws {}

    func stop(by deadline: ContinuousClock.Instant) {
        primary.shutdown()
        reports?.shutdown()
        keys.shutdown()
    }
}

extension ShardRouter: Service {
    var name: String { "Citus shard map" }
}

extension KeyringSync: Service {
    var name: String { "advertiser keys" }
}

extension EventIngestor: Service {
    var name: String { "group commit" }

    func stop(by deadline: ContinuousClock.Instant) {
        shutdown(by: deadline)
    }
}

/// The HTTP server: listens when started; when stopped, stops accepting, finishes the requests in
/// flight and closes idle connections, forcing what is left at the deadline.
struct HTTPService: Service {
    let server: HTTPServer

    var name: String { "HTTP server" }

    func start() throws {
        try server.start()
    }

    func stop(by deadline: ContinuousClock.Instant) {
        server.shutdown(gracePeriod: deadline.remaining)
    }
}

extension MaintenanceScheduler: Service {
    var name: String { "maintenance" }

    func stop(by deadline: ContinuousClock.Instant) {
        shutdown(by: deadline)
    }
}
