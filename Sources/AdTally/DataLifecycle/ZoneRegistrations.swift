import Postgres
import Runtime
import Synchronization

/// The zones whose local days maintenance keeps daily rollups for: a zone is registered on the
/// primary (`Rollups.registerZone`) the first time this process reports in it, and again after a
/// failure. Nothing waits for it but that first report, which reads finer rollups meanwhile.
public final class ZoneRegistrations: Sendable {
    private let pool: PostgresPool
    private let logger: Logger
    private let registered = Mutex<Set<String>>([])

    public init(pool: PostgresPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    public func register(_ zone: String) {
        let isNew = registered.withLock { $0.insert(zone).inserted }
        guard isNew else { return }
        do {
            try pool.withConnection { try Rollups.registerZone(zone, on: $0) }
        } catch {
            _ = registered.withLock { $0.remove(zone) }
            logger.warning("time zone not registered for daily rollups", [("tz", .string(zone)), ("error", .string("\(error)"))])
        }
    }
}
