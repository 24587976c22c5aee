import Dispatch
import Foundation
import Postgres
import Runtime
import Synchronization
import Timestamps

/// Keeps a process's `AdvertiserKeyring` in step with `advertiser_keys`, on a thread of its own
/// (API.md section 13: a revoked key is refused by every process within 5 s; `last_used_at` is at
/// most 60 s behind).
///
/// Every `refreshInterval` it reads `advertiser_key_changes.version`, one row by its key, and only
/// when the version moved (a key was made or revoked through any process) every key; so a
/// revocation reaches this process within `refreshInterval` and a query's time. Every
/// `lastUseInterval` it writes the `last_used_at` of the keys used since the last write. While the
/// database cannot be read, the keys in memory stay in force and the uses wait for the next write.
/// `pool` is the poll's own (one connection), so that the poll never waits behind ingestion or
/// reports for a connection of the process's pool (on Citus under report load a revocation was
/// first measured at 5.1 s; most of that was the test timing a report, not the poll's wait).
///
/// `LISTEN`/`NOTIFY` would tell sooner, but needs a connection held open per process (through
/// pgbouncer in transaction mode, not at all) and still a poll to notice a lost connection; a read
/// of one row a second costs every process less than a millisecond of the database's time.
public final class KeyringSync: Sendable {
    public let keyring: AdvertiserKeyring
    private let pool: PostgresPool
    private let refreshInterval: Duration
    private let lastUseInterval: Duration
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()

    public init(keyring: AdvertiserKeyring, pool: PostgresPool, refreshInterval: Duration, lastUseInterval: Duration, logger: Logger) {
        self.keyring = keyring
        self.pool = pool
        self.refreshInterval = refreshInterval
        self.lastUseInterval = lastUseInterval
        self.logger = logger
    }

    /// Reads the keys again if their version moved since the last read (or they were never read).
    public func refresh() throws {
        try pool.withConnection { connection in
            let version = try connection.query("SELECT version FROM advertiser_key_changes").first?.decode(Int64.self, at: 0) ?? 0
            guard keyring.version != version else { return }
            // The keys and the version from one snapshot, so that a change between the two reads
            // is read again next time rather than missed.
            let (entries, read) = try connection.withTransaction(TransactionOptions(isolation: .repeatableRead, readOnly: true)) { transaction in
                let read = try transaction.query("SELECT version FROM advertiser_key_changes").first?.decode(Int64.self, at: 0) ?? 0
                var entries: [SHA256.Digest: AdvertiserKeyring.Entry] = [:]
                for row in try transaction.query("""
                    SELECT key_id, advertiser_id, array_to_string(scopes, ','), encode(digest, 'hex'), revoked_at IS NOT NULL FROM advertiser_keys
                    """).rows {
                    var columns = row.columns()
                    let keyID: String = try columns.next(), advertiserID: String = try columns.next()
                    let scopeNames: String = try columns.next(), digestHex: String = try columns.next()
                    let revoked: Bool = try columns.next()
                    // The table's checks admit only the known scope names and 32-byte digests.
                    let scopes = AdvertiserKey.Scopes(names: scopeNames.split(separator: ",").map(String.init)) ?? []
                    guard let digest = SHA256.Digest(hex: digestHex) else { continue }
                    entries[digest] = AdvertiserKeyring.Entry(key: AdvertiserKey(keyID: keyID, advertiserID: advertiserID, scopes: scopes),
                                                              revoked: revoked)
                }
                return (entries, read)
            }
            keyring.replace(entries, version: read)
        }
    }

    /// Writes the `last_used_at` of the keys used since the last write (never earlier than it was).
    public func writeLastUse() throws {
        let used = keyring.takeUses()
        guard !used.isEmpty else { return }
        let keyIDs = Array(used.keys)
        let times = PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: keyIDs.map { used[$0]?.microsecondsSinceEpoch })
        do {
            _ = try pool.withConnection { connection in
                try connection.execute("""
                    UPDATE advertiser_keys k SET last_used_at = greatest(k.last_used_at, u.t)
                    FROM unnest(\(PostgresBinaryArray.text(keyIDs))::text[], \(times)::timestamptz[]) AS u(id, t)
                    WHERE k.key_id = u.id
                    """)
            }
        } catch {
            keyring.restoreUses(used)
            throw error
        }
    }

    /// Reads the keys once (a process that cannot refuses every key until it can), then keeps
    /// them fresh and writes their uses on a thread of its own.
    public func start() {
        do {
            try refresh()
        } catch {
            logger.warning("advertiser keys not read at start: every key is refused until they are", [("error", .string("\(error)"))])
        }
        Thread.start(name: "adtally-keyring", in: finished) { [self] in
            var lastWrite = ContinuousClock.now
            while true {
                _ = wake.wait(timeout: .now() + refreshInterval.dispatchInterval)
                let stopping = stopped.load(ordering: .acquiring)
                do {
                    if !stopping { try refresh() }
                    if stopping || ContinuousClock.now - lastWrite >= lastUseInterval {
                        lastWrite = ContinuousClock.now
                        try writeLastUse()
                    }
                } catch {
                    logger.warning("advertiser keys not read or their uses not written: the keys in memory stay in force",
                                   [("error", .string("\(error)"))])
                }
                if stopping { return }
            }
        }
    }

    /// Writes the last uses and stops the thread, by `deadline` at the latest.
    public func stop(by deadline: ContinuousClock.Instant) {
        stopped.store(true, ordering: .releasing)
        wake.signal()
        _ = finished.wait(timeout: .now() + deadline.remaining.dispatchInterval)
    }
}
