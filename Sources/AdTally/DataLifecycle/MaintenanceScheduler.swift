import Dispatch
import Foundation
import Postgres
import Runtime
import Timestamps

/// Runs maintenance in a serving process every `ADTALLY_MAINTENANCE_INTERVAL_SECONDS` (0: never),
/// and every few seconds between runs folds the events received since the last fold (the
/// continuous fold, when maintenance runs here at all) and publishes `final_before` for standbys
/// (whatever the interval), on a thread of its own with a pooled connection: a run never holds up a
/// request's thread. Maintenance's connections wait for an answer past its statement limit, so
/// that the pool's shorter bound never abandons a busy fold. Each run is logged in one line at
/// `info`.
public final class MaintenanceScheduler: Sendable {
    private let pool: PostgresPool
    private let maintenance: Maintenance
    private let metrics: any MaintenanceMetrics
    private let logger: Logger
    private let interval: Int
    private let heartbeatSeconds: Int
    private let stop = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()

    public init(pool: PostgresPool, maintenance: Maintenance, metrics: any MaintenanceMetrics, logger: Logger, intervalSeconds: Int, heartbeatSeconds: Int = 5) {
        self.pool = pool
        self.maintenance = maintenance
        self.metrics = metrics
        self.logger = logger
        self.interval = intervalSeconds
        self.heartbeatSeconds = max(1, heartbeatSeconds)
    }

    public func start() {
        Thread.start(name: "adtally-maintenance", in: finished) { [self] in loop() }
    }

    /// Ends the loop after the step under way; waits until `deadline` at the latest (a step still
    /// running then ends with the process; every step is a transaction of its own, so nothing is
    /// left half done).
    public func shutdown(by deadline: ContinuousClock.Instant) {
        stop.signal()
        _ = finished.wait(timeout: .now() + deadline.remaining.dispatchInterval)
    }

    private func loop() {
        var nextRun = interval > 0 ? DispatchTime.now() + .seconds(min(interval, 5)) : DispatchTime.distantFuture
        while true {
            let wake = min(nextRun, .now() + .seconds(heartbeatSeconds))
            if stop.wait(timeout: wake) == .success { return }
            if interval > 0 && DispatchTime.now() >= nextRun {
                runOnce()
                nextRun = .now() + .seconds(interval)
            } else {
                heartbeat()
            }
        }
    }

    private func runOnce() {
        let report: Maintenance.Report
        do {
            report = try pool.withConnection(answerTimeout: maintenance.settings.answerTimeout) { maintenance.run(on: $0) }
        } catch {
            var failed = Maintenance.Report()
            failed.result = .failed
            failed.error = "\(error)"
            report = failed
        }
        metrics.record(maintenanceRun: report.result.rawValue, oldestReceived: report.oldestReceived, finalBefore: report.finalBefore)
        var fields: [(String, LogValue)] = [
            ("result", .string(report.result.rawValue)), ("folds", .int(report.folds)), ("days_folded", .int(report.daysFolded)),
            ("hours_refolded", .int(report.hoursRefined)), ("leftovers_dropped", .int(report.leftoversDropped.count)),
            ("unregistered_rollup_rows_deleted", .int(report.unregisteredRowsDeleted)),
            ("events_folded", .int(Int(report.eventsFolded))), ("partitions_made", .int(report.partitionsMade.count)),
            ("partitions_dropped", .int(report.partitionsDropped.count)), ("ledger_pruned", .int(report.ledgerPruned)),
            ("sessions_forgotten", .int(report.sessionsForgotten)),
        ]
        if let foldedTo = report.foldedTo { fields.append(("folded_to", .string(foldedTo.rfc3339))) }
        if let error = report.error { fields.append(("error", .string(error))) }
        if report.result == .failed {
            logger.warning("maintenance failed", fields)
        } else {
            logger.info("maintenance", fields)
        }
    }

    private func heartbeat() {
        if interval > 0 {
            do {
                _ = try pool.withConnection(answerTimeout: maintenance.settings.answerTimeout) { try maintenance.foldRecent(on: $0) }
            } catch {
                logger.warning("continuous fold failed", [("error", "\(error)")])
            }
        }
        do {
            if let finalBefore = try pool.withConnection({ try LifecycleState.publishFinalBefore(on: $0) }) {
                metrics.record(finalBefore: finalBefore)
            }
        } catch {
            logger.debug("final_before not published", [("error", "\(error)")])
        }
    }
}

/// Where maintenance's runs and the history it learnt are counted for `/metrics`
/// (`adtally_maintenance_runs_total{result}`, `adtally_events_oldest_received_seconds`,
/// `adtally_reports_final_before_seconds`).
public protocol MaintenanceMetrics: Sendable {
    func record(maintenanceRun result: String, oldestReceived: Timestamp?, finalBefore: Timestamp?)
    func record(finalBefore: Timestamp)
}
