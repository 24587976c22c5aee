import Foundation
import Postgres

/// Applies pending migrations in order, each in its own transaction, recorded in
/// `schema_migrations`. A transaction-level advisory lock, taken first in each of those
/// transactions, makes processes that start together take turns: the first applies a migration,
/// the others then find it recorded and skip it. (A session-level lock held across transactions
/// would not work behind a pooler in transaction mode, where each transaction may run on another
/// server connection: the unlock could go to a session that does not hold the lock, which would
/// keep it until the pooler closed that connection.)
public struct MigrationRunner: Sendable {
    /// The advisory lock key ("AdTally" in ASCII), shared by every AdTally process on a database.
    static let lockKey: Int64 = 0x41_6454_616C_6C79

    /// The migrations this program knows, in order.
    public let migrations: [Migration]
    /// The folder they were read from, if any (for the log).
    public let directory: URL?

    public init(migrations: [Migration], directory: URL? = nil) {
        self.migrations = migrations
        self.directory = directory
    }

    /// The migrations of `directory` (the setting named `variable`), or of the folder
    /// `Migration.locateDirectory` finds without one, read once.
    public static func located(directory configured: String?, variable: String) throws -> MigrationRunner {
        guard let directory = configured.map({ URL(fileURLWithPath: $0) }) ?? Migration.locateDirectory() else {
            throw MigrationError.directoryUnreadable("migrations", "no migrations folder found; set \(variable)")
        }
        return MigrationRunner(migrations: try Migration.load(from: directory), directory: directory)
    }

    /// What a run did.
    public struct Report: Sendable, Equatable {
        /// File names applied by this run, in order.
        public var applied: [String] = []
        /// Versions recorded in the database that this program does not know (a newer release ran).
        public var unknownVersions: [Int] = []
        /// Files recorded with an earlier text that the file lists (`Migration.earlierChecksums`),
        /// whose records now carry the current checksum.
        public var corrected: [String] = []
    }

    /// Applies what is pending. Throws `MigrationError.checksumMismatch` naming the file when an
    /// applied migration's text changed, before applying anything.
    @discardableResult
    public func apply(on connection: PostgresConnection) throws -> Report {
        // First the table and the checks, under the lock: every applied file must be unchanged
        // before anything new is applied.
        var report = Report()
        if try DatabaseNode.detect(on: connection) == .citusWorker {
            // DDL on distributed tables is the coordinator's: through a worker, nothing is applied,
            // and a process starts only once the coordinator applied everything it knows. Before
            // migration 0011 a worker has no schema_migrations (it was the coordinator's alone).
            let pending = try pendingVersions(on: connection)
            guard pending.isEmpty else { throw MigrationError.pendingOnCitusWorker(pending) }
            return report
        }
        let known = Set(migrations.map(\.version))
        var checksums: [Int: String] = [:]
        let pending = try connection.withTransaction { transaction -> [Migration] in
            try transaction.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))")
            try transaction.execute("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version     integer     PRIMARY KEY,
                    name        text        NOT NULL,
                    checksum    text        NOT NULL,
                    applied_at  timestamptz NOT NULL DEFAULT now()
                )
                """)
            let applied = try appliedChecksums(on: try transaction.connection())
            report.unknownVersions = applied.keys.filter { !known.contains($0) }.sorted()
            var pending: [Migration] = []
            for migration in migrations {
                let checksum = try Self.checksum(of: migration, on: try transaction.connection())
                checksums[migration.version] = checksum
                if let recorded = applied[migration.version] {
                    if recorded != checksum, migration.earlierChecksums.contains(recorded) {
                        // The earlier text of a corrected migration: same schema, new record.
                        try transaction.query("""
                            UPDATE schema_migrations SET checksum = \(checksum) WHERE version = \(migration.version) AND checksum = \(recorded)
                            """)
                        report.corrected.append(migration.fileName)
                        continue
                    }
                    guard recorded == checksum else {
                        throw MigrationError.checksumMismatch(fileName: migration.fileName, applied: recorded, current: checksum)
                    }
                } else {
                    pending.append(migration)
                }
            }
            return pending
        }
        for migration in pending {
            // Every pending migration's checksum was computed in the loop that found it pending.
            guard let checksum = checksums[migration.version] else { preconditionFailure("no checksum for \(migration.fileName)") }
            do {
                let appliedHere = try connection.withTransaction { transaction -> Bool in
                    try transaction.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))")
                    // Another process may have applied it while this one waited for the lock.
                    let recorded = try transaction.query("SELECT checksum FROM schema_migrations WHERE version = \(migration.version)")
                        .first?.decode(String.self, at: 0)
                    if let recorded {
                        guard recorded == checksum else {
                            throw MigrationError.checksumMismatch(fileName: migration.fileName, applied: recorded, current: checksum)
                        }
                        return false
                    }
                    // One statement at a time: Citus sends some DDL to its workers in the text it
                    // came in, and refuses a text of several statements there (SQLStatements).
                    for statement in SQLStatements.split(migration.sql) { try transaction.execute(PostgresQuery(unsafeRawSQL: statement)) }
                    try transaction.query("INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(checksum))")
                    return true
                }
                if appliedHere { report.applied.append(migration.fileName) }
            } catch let error as PostgresError where !error.isConnectionGone {
                throw MigrationError.failed(fileName: migration.fileName, message: error.description)
            }
        }
        return report
    }

    /// Versions known to this program and not yet applied: readiness fails while any remain.
    public func pendingVersions(on connection: PostgresConnection) throws -> [Int] {
        let exists = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL").first?.decode(Bool.self, at: 0) ?? false
        guard exists else { return migrations.map(\.version) }
        let applied = try appliedChecksums(on: connection)
        return migrations.map(\.version).filter { applied[$0] == nil }
    }

    private func appliedChecksums(on connection: PostgresConnection) throws -> [Int: String] {
        var applied: [Int: String] = [:]
        for row in try connection.query("SELECT version, checksum FROM schema_migrations").rows {
            applied[try row.decode(Int.self, at: 0)] = try row.decode(String.self, at: 1)
        }
        return applied
    }

    /// SHA-256 of the file's bytes, computed by PostgreSQL (no hashing library ships with the toolchain
    /// on Linux, and the database already has a correct one).
    static func checksum(of migration: Migration, on connection: PostgresConnection) throws -> String {
        let row = try connection.query("SELECT encode(sha256(convert_to(\(migration.sql), 'UTF8')), 'hex')").first
        guard let row else { throw PostgresError(kind: .statementFailed, message: "sha256 returned no row") }
        return try row.decode(String.self, at: 0)
    }
}
