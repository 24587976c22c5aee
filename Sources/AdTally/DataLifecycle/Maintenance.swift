import Foundation
import Postgres
import Runtime
import Timestamps

/// The data lifecycle's one job (API.md section 7): partitions made ahead, rollups advanced, aged
/// partitions dropped, the ledger pruned, idle sessions forgotten, `final_before` published for
/// standbys. Any process may run it at any time, as often as it likes (every serving process does
/// every `ADTALLY_MAINTENANCE_INTERVAL_SECONDS`, and `adtally maintain` once). A run first takes a
/// lease in `lifecycle_state` (a short transaction; it expires should the process stop), so that
/// when several processes run it at once one does the work and the others skip it; each step is
/// then a short transaction that also takes a transaction-level advisory lock, and nothing is held
/// between statements (a pooler in transaction mode would break a session-level lock). Every step
/// is idempotent, and
/// every statement that locks `events` does so under a lock timeout, retried on the next run,
/// rather than queue behind a long report and stall ingestion.
public struct Maintenance: Sendable {
    /// What it keeps, and how long one run may work.
    public struct Settings: Sendable, Equatable {
        public var eventsRetentionDays: Int
        public var sessionTTLDays: Int
        /// A run stops starting new slices of work after this long (the rest waits for the next run).
        public var budget: TimeInterval
        public var lockTimeout: String
        /// Every statement of maintenance is given up (and cancelled on the server) after this long
        /// (`ADTALLY_MAINTENANCE_STATEMENT_TIMEOUT_SECONDS`), and its connection waits a little
        /// longer for the answer, so that a busy fold is never abandoned while the server still works on it.
        public var limit: StatementLimit

        /// What to keep and the statement limit come from the configuration
        /// (`Maintenance.Settings(configuration)`); the run's budget and lock timeout are maintenance's own.
        public init(eventsRetentionDays: Int, sessionTTLDays: Int, budget: TimeInterval = 20, lockTimeout: String = "2s",
                    limit: StatementLimit) {
            self.eventsRetentionDays = eventsRetentionDays
            self.sessionTTLDays = sessionTTLDays
            self.budget = budget
            self.lockTimeout = lockTimeout
            self.limit = limit
        }

        /// `statement_timeout`'s value for maintenance's statements.
        var statementTimeout: String { limit.setting }

        /// How long a maintenance connection waits for an answer before it gives the connection up.
        public var answerTimeout: Duration { limit.answerTimeout }
    }

    /// How a run ended (`adtally_maintenance_runs_total{result}`).
    public enum Result: String, Sendable, CaseIterable {
        /// It did what there was to do.
        case ok
        /// Another process held the work.
        case skipped
        /// A step failed (logged); the next run tries again.
        case failed
    }

    /// What one run did: its result, one line per step (the JSON lines of `adtally maintain`), and
    /// the figures the metrics show.
    public struct Report: Sendable {
        public var result: Result = .ok
        public var steps: [[(String, LogValue)]] = []
        public var partitionsMade: [String] = []
        public var partitionsDropped: [String] = []
        /// Tables of `DETACH ... CONCURRENTLY`s given up earlier, found and dropped.
        public var leftoversDropped: [String] = []
        public var folds = 0
        public var daysFolded = 0
        public var hoursRefined = 0
        public var eventsFolded: Int64 = 0
        /// Rollup rows of ads no snapshot registered, deleted with their raw rows.
        public var unregisteredRowsDeleted = 0
        /// Credit marks of dropped raw rows deleted (API 1.4).
        public var creditMarksPruned = 0
        public var ledgerPruned = 0
        public var sessionsForgotten = 0
        public var foldedTo: Timestamp?
        public var finalBefore: Timestamp?
        public var oldestReceived: Timestamp?
        public var error: String?
    }

    /// The advisory lock key of maintenance ("ADTA" "MAIN"), tried at the start of each step.
    static let lockKey: Int64 = 0x4144_5441_4D41_494E
    static let tryLock: PostgresQuery = "SELECT pg_try_advisory_xact_lock(\(lockKey))"

    public let settings: Settings
    /// This process's name in the lease.
    let owner: String

    public init(settings: Settings, owner: String = "\(ProcessInfo.processInfo.hostName):\(getpid()):\(UUID().uuidString.prefix(8))") {
        self.settings = settings
        self.owner = owner
    }

    /// Runs every step once on `connection`. Never throws: a failure ends the run as `failed`,
    /// with the error in the report, and leaves the connection outside a transaction.
    public func run(on connection: PostgresConnection, now: Date = Date()) -> Report {
        var report = Report()
        let deadline = now.addingTimeInterval(settings.budget)
        let limit = settings.statementTimeout
        do {
            guard try takeLease(on: connection) else {
                report.result = .skipped
                report.steps.append([("step", "skipped"), ("reason", "another process is running maintenance")])
                return report
            }
            defer { try? releaseLease(on: connection) }
            // 1. Tables a detach given up earlier left (before the partitions are made: one of a
            //    day still to come would keep its day from getting a partition), then partitions a
            //    week ahead: ingestion never meets a day without one.
            report.leftoversDropped = try Retention.dropDetachedLeftovers(statementTimeout: limit, on: connection)
            report.partitionsMade = try EventPartitions.ensure(around: nil, lockTimeout: settings.lockTimeout, statementTimeout: limit,
                                                               on: connection)
            report.steps.append([("step", "partitions"), ("made", .string(report.partitionsMade.joined(separator: ",")))])

            // 2. Rollups: every event before final_before into its quarter, then the days of every
            //    phase, then the hourly history of before 0010 again from its raw rows.
            // The clock moves on while it folds: one fold past a catch-up is enough for this run.
            while Date() < deadline {
                let (fold, skipped) = try Rollups.foldRecent(statementTimeout: limit, on: connection)
                if skipped { report.result = .skipped; break }
                guard let fold else { break }
                report.folds += 1
                report.eventsFolded += fold.events
                if fold.caughtUp { break }
            }
            while Date() < deadline, report.result == .ok {
                let (fold, skipped) = try Rollups.foldNextDay(statementTimeout: limit, on: connection)
                if skipped { report.result = .skipped; break }
                guard fold != nil else { break }
                report.daysFolded += 1
            }
            while Date() < deadline, report.result == .ok {
                let (step, skipped) = try Rollups.refineLegacy(statementTimeout: limit, on: connection)
                if skipped { report.result = .skipped; break }
                guard case .refined = step else { break }
                report.hoursRefined += 1
            }
            let state = try LifecycleState.read(on: connection)
            report.foldedTo = state.foldedTo
            report.steps.append([("step", "rollups"), ("folds", .int(report.folds)), ("events_folded", .int(Int(report.eventsFolded))),
                                 ("days_folded", .int(report.daysFolded)), ("hours_refolded", .int(report.hoursRefined)),
                                 ("folded_to", .string(state.foldedTo.rfc3339))])

            // 3. Retention: whole aged partitions (already folded),
            //    the rollup rows of unregistered ads that went with them, then the ledger, then idle
            //    sessions.
            let dayMicroseconds: Int64 = 86_400 * 1_000_000
            let current = Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: now))
            let horizon = current.adding(microseconds: -Int64(settings.eventsRetentionDays) * dayMicroseconds)
            if report.result == .ok {
                let refiningBefore = state.rollups.refining ? state.rollups.quartersFrom.map(Timestamp.init(microsecondsSinceEpoch:)) : nil
                report.partitionsDropped = try Retention.dropAgedPartitions(horizon: horizon, foldedTo: state.foldedTo, refiningBefore: refiningBefore,
                                                                           citus: try Self.isCitus(on: connection), lockTimeout: settings.lockTimeout,
                                                                           statementTimeout: limit, on: connection)
                report.unregisteredRowsDeleted = try Retention.deleteUnregisteredRollups(statementTimeout: limit, on: connection)
                let recorded = try connection.query("SELECT oldest_received_at FROM lifecycle_state").first?.decode(Timestamp?.self, at: 0)
                report.oldestReceived = (report.partitionsDropped.isEmpty && recorded != nil) ? recorded
                    : try Retention.refreshOldestReceived(on: connection)
                // The credit marks of the raw rows that went (none kept: those before the horizon).
                report.creditMarksPruned = try Retention.pruneCreditMarks(before: min(report.oldestReceived ?? horizon, horizon),
                                                                          statementTimeout: limit, on: connection)
            }
            report.steps.append([("step", "partitions_dropped"), ("dropped", .string(report.partitionsDropped.joined(separator: ","))),
                                 ("leftovers_dropped", .string(report.leftoversDropped.joined(separator: ","))),
                                 ("unregistered_rollup_rows_deleted", .int(report.unregisteredRowsDeleted)),
                                 ("credit_marks_pruned", .int(report.creditMarksPruned)),
                                 ("horizon", .string(horizon.rfc3339)), ("oldest_received_at", Self.text(report.oldestReceived))])

            // A replay of an id received more than 7 days and 10 minutes ago fails rule 1 (an hour
            // more for the difference between the database's clock and the servers').
            let ledgerCutoff = current.adding(microseconds: -(7 * dayMicroseconds + 70 * 60 * 1_000_000))
            if report.result == .ok, Date() < deadline {
                report.ledgerPruned = try Retention.pruneLedger(before: ledgerCutoff, budget: max(0, deadline.timeIntervalSinceNow),
                                                                statementTimeout: limit, on: connection)
            }
            report.steps.append([("step", "ledger"), ("pruned", .int(report.ledgerPruned)), ("before", .string(ledgerCutoff.rfc3339))])

            let sessionCutoff = now.addingTimeInterval(-Double(settings.sessionTTLDays) * 86_400)
            if report.result == .ok, Date() < deadline {
                report.sessionsForgotten = try Retention.forgetIdleSessions(before: sessionCutoff, budget: max(0, deadline.timeIntervalSinceNow),
                                                                           statementTimeout: limit, on: connection)
            }
            report.steps.append([("step", "sessions"), ("forgotten", .int(report.sessionsForgotten)),
                                 ("idle_before", .string(Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: sessionCutoff)).rfc3339))])

            // 4. final_before for standbys.
            report.finalBefore = try LifecycleState.publishFinalBefore(on: connection)
            report.steps.append([("step", "final_before"), ("final_before", Self.text(report.finalBefore))])
        } catch {
            if connection.isInTransaction { _ = try? connection.execute("ROLLBACK") }
            report.result = .failed
            report.error = "\(error)"
            report.steps.append([("step", "failed"), ("error", .string("\(error)"))])
        }
        return report
    }

    /// The continuous fold alone (every few seconds in every serving process, between runs): the
    /// events received since the last fold, before `final_before`, into their quarters. Returns the
    /// events folded; nil when another process was folding.
    public func foldRecent(on connection: PostgresConnection) throws -> Int64? {
        var events: Int64 = 0
        let deadline = Date().addingTimeInterval(settings.budget)
        while Date() < deadline {
            let (fold, skipped) = try Rollups.foldRecent(statementTimeout: settings.statementTimeout, on: connection)
            if skipped { return nil }
            guard let fold else { break }
            events += fold.events
            if fold.caughtUp { break }
        }
        return events
    }

    /// Takes the run's lease if no other process holds it: the lease lasts the run's budget and a
    /// margin, so that one that stopped mid-run lets the next run go ahead.
    private func takeLease(on connection: PostgresConnection) throws -> Bool {
        let seconds = Int(settings.budget) + 60
        // A fold of another process holds the row for a moment: skip rather than wait for it.
        let taken = try connection.query("""
            UPDATE lifecycle_state SET maintenance_owner = \(owner), maintenance_until = clock_timestamp() + make_interval(secs => \(seconds)::int)
            WHERE singleton IN (SELECT singleton FROM lifecycle_state
                                WHERE maintenance_until IS NULL OR maintenance_until < clock_timestamp() OR maintenance_owner = \(owner)
                                FOR UPDATE SKIP LOCKED)
            RETURNING true
            """)
        return taken.rowCount == 1
    }

    private func releaseLease(on connection: PostgresConnection) throws {
        try connection.query("UPDATE lifecycle_state SET maintenance_until = NULL WHERE maintenance_owner = \(owner)")
    }

    private static func text(_ time: Timestamp?) -> LogValue { .string(time?.rfc3339 ?? "none") }

    /// Whether the database runs Citus (whose partitions are detached without CONCURRENTLY).
    static func isCitus(on connection: PostgresConnection) throws -> Bool {
        try connection.query("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").first?.decode(Bool.self, at: 0) ?? false
    }
}
