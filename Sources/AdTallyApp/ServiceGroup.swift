import AdTally
import Dispatch
import Foundation
import Runtime
import Synchronization

/// A long-running part of the process (after swift-service-lifecycle's `Service`): the database
/// pools, group commit, the HTTP server, maintenance.
protocol Service: Sendable {
    /// For the log.
    var name: String { get }
    /// Starts the service; throws when it cannot (the group then stops what it started).
    func start() throws
    /// Stops gracefully, forcing whatever is left at `deadline`; returns by then.
    func stop(by deadline: ContinuousClock.Instant)
}

/// Runs services as one process (after swift-service-lifecycle's `ServiceGroup`): starts them in
/// order, and on `SIGTERM` or `SIGINT` stops them in reverse order under one graceful deadline,
/// so that each still has what it needs while it stops (the HTTP server finishes requests in
/// flight while group commit and the pools still run). `SIGHUP` runs the reload handlers. The
/// signals are handled here and nowhere else.
final class ServiceGroup: Sendable {
    /// The graceful deadline: from the signal to the last service stopped. API.md section 5 asks
    /// for an exit within 10 s; docker-compose gives the container 15 s (`stop_grace_period`)
    /// before it kills it.
    static let gracePeriod: Duration = .seconds(10)

    private let services: [any Service]
    private let gracePeriod: Duration
    private let logger: Logger
    private let reload: @Sendable () -> Void
    private let stopRequested = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let signalSources = Mutex<[any DispatchSourceSignal]>([])

    init(services: [any Service], gracePeriod: Duration = ServiceGroup.gracePeriod, logger: Logger,
         reload: @escaping @Sendable () -> Void = {}) {
        self.services = services
        self.gracePeriod = gracePeriod
        self.logger = logger
        self.reload = reload
    }

    /// Starts every service, waits for a stop (a signal, or `requestStop`), stops them, and returns
    /// the exit code: 0 after a graceful stop, 1 when a service could not start. Blocks the calling
    /// thread (the main thread, in `adtally serve`).
    func run() -> Int32 {
        // Before anything starts: whoever waits for the "listening" line may send SIGTERM at once.
        installSignals()
        defer { removeSignals() }
        var started: [any Service] = []
        for service in services {
            if stopping.load(ordering: .acquiring) { break }
            do {
                try service.start()
                started.append(service)
            } catch {
                logger.error("cannot start \(service.name)", [("error", .string("\(error)"))])
                stop(started, by: ContinuousClock.now + gracePeriod)
                return 1
            }
        }
        stopRequested.wait()
        stop(started, by: ContinuousClock.now + gracePeriod)
        return 0
    }

    /// Asks the group to stop, as a signal does.
    func requestStop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        stopRequested.signal()
    }

    private func stop(_ started: [any Service], by deadline: ContinuousClock.Instant) {
        for service in started.reversed() {
            service.stop(by: deadline)
        }
    }

    private func installSignals() {
        let queue = DispatchQueue(label: "adtally.signals")
        signalSources.withLock { sources in
            for (number, action) in [(SIGTERM, "stop"), (SIGINT, "stop"), (SIGHUP, "reload")] {
                // Ignored first, so that the default action (terminating) does not race the source.
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { [self] in
                    if action == "reload" {
                        reload()
                        return
                    }
                    // A second signal while stopping changes nothing: the deadline bounds the stop.
                    guard !stopping.load(ordering: .acquiring) else { return }
                    logger.info("shutting down: finishing requests in flight", [("signal", .int(Int(number)))])
                    requestStop()
                }
                source.resume()
                sources.append(source)
            }
        }
    }

    private func removeSignals() {
        signalSources.withLock { sources in
            for source in sources { source.cancel() }
            sources = []
        }
    }
}
