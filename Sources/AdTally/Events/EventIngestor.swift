import Contract
import Dispatch
import Foundation
import Postgres
import Runtime
import Synchronization
import Timestamps

/// Group commit for events: requests hand their well-formed events to a small set of committer
/// threads, each of which takes whatever is queued (from many requests), decides and stores it in
/// one transaction, and answers every request of that transaction only after `COMMIT` returned.
/// Under load this turns many small transactions into few large ones, which is what makes the
/// durable-write rate of PostgreSQL go further; idle, a lone request commits at once. Committers
/// do not run two transactions at once that lock the same rows (`CommitQueue`).
///
/// A request does not hold a thread while it waits: `submit` queues it with a completion that the
/// committer calls after `COMMIT` (or a watchdog, when it waited too long for a committer).
public final class EventIngestor: Sendable {
    /// One request's events waiting for their transaction. Whoever removes it from the queue (a
    /// committer, the watchdog or shutdown, each under the lock) calls `completion`, exactly once.
    private final class Submission: Sendable {
        let events: [EventInput]
        /// What it may share a transaction with on Citus (`CommitQueue`), and where that runs.
        let group: TransactionGroup?
        /// `DispatchTime.now().uptimeNanoseconds` after which it is answered `503` if still queued.
        let deadline: UInt64
        let completion: @Sendable (Result<[EventOutcome], any Error>) -> Void

        init(events: [EventInput], group: TransactionGroup?, deadline: UInt64,
             completion: @escaping @Sendable (Result<[EventOutcome], any Error>) -> Void) {
            self.events = events
            self.group = group
            self.deadline = deadline
            self.completion = completion
        }
    }

    private struct State {
        var queue: CommitQueue<Submission>
        var started = false
        var stopped = false
    }

    private let pool: PostgresPool
    private let store: EventStore
    /// The clock whose instant stamps each transaction's events; nil for the database's, which is
    /// what the service uses (`EventStore.ReceivedAt`).
    private let clock: (any WallClock)?
    private let logger: Logger
    private let maximumBatchEvents: Int
    private let queueWait: Duration
    private let committers: Int
    /// Where transactions run: on Citus a transaction takes the requests of one group only
    /// (`CommitQueue`), and with the shard map it runs on the node of its shard.
    private let topology: EventTopology
    private let state: Mutex<State>
    private let work = DispatchSemaphore(value: 0)
    /// Signalled once, by `shutdown`, to end the watchdog's sleep.
    private let watchdogStop = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()

    /// Group commit with `committers` threads and a watchdog, once `start`ed. `queueWait` bounds
    /// how long a request waits for a committer before it is answered `503` (its events then never
    /// reach the database). The store's topology says what a transaction may hold (`EventTopology`);
    /// routed on Citus, at most `transactionsPerShard` run at once on a shard.
    public init(pool: PostgresPool, store: EventStore, clock: (any WallClock)? = nil, logger: Logger,
                committers: Int, maximumBatchEvents: Int = 5_000, queueWait: Duration, transactionsPerShard: Int = 1) {
        self.pool = pool
        self.store = store
        self.clock = clock
        self.logger = logger
        self.maximumBatchEvents = maximumBatchEvents
        self.queueWait = queueWait
        self.committers = max(1, committers)
        self.topology = store.topology
        self.state = Mutex(State(queue: CommitQueue(committers: self.committers, transactionsPerShard: transactionsPerShard)))
    }

    /// Starts the committers and the watchdog (once; later calls do nothing). Requests submitted
    /// before wait for them.
    public func start() {
        guard state.withLock({ state in
            defer { state.started = true }
            return !state.started
        }) else { return }
        for number in 0..<committers {
            Thread.start(name: "adtally-commit-\(number)", in: finished) { [self] in runCommitter(number) }
        }
        Thread.start(name: "adtally-commit-watchdog", in: finished) { [self] in runWatchdog() }
    }

    /// Queues `events` to be decided and stored (in order); `completion` gets their outcomes after
    /// the transaction that holds them committed, on a committer thread (or at once, on this one,
    /// when there is nothing to store or the ingestor is stopped). It gets a `PostgresError` whose
    /// `isConnectionGone` is true when the database could not be used: nothing of this request is
    /// stored then, or, if the connection broke during `COMMIT`, it may be, and a retry is answered
    /// from the idempotency ledger. Completions must be quick: the committer's next transaction
    /// waits for them. `client` (a hash of the client's address; 0 when unknown) gives each
    /// client its turn in the transactions when several wait (`CommitQueue`).
    public func submit(_ events: [EventInput], client: Int = 0,
                       completion: @escaping @Sendable (Result<[EventOutcome], any Error>) -> Void) {
        guard !events.isEmpty else {
            completion(.success([]))
            return
        }
        let deadline = DispatchTime.now().uptimeNanoseconds &+ queueWait.nanoseconds
        let group = topology.groupsTransactions ? topology.group(of: events.map(\.sessionID)) : nil
        let submission = Submission(events: events, group: group, deadline: deadline, completion: completion)
        let rowKeys = CommitQueue<Submission>.rowKeys(of: events)  // hashed before taking the lock
        let accepted = state.withLock { state -> Bool in
            // Without committers nothing would ever answer: a caller that forgot `start()` is a
            // programmer error, caught in debug builds (the service starts it before it listens).
            assert(state.started || state.stopped, "EventIngestor.submit before start()")
            guard !state.stopped else { return false }
            state.queue.append(submission, events: submission.events.count, rowKeys: rowKeys, group: group, client: client)
            return true
        }
        guard accepted else {
            completion(.failure(IngestRefusal.shuttingDown))
            return
        }
        work.signal()
    }

    /// `submit`, waiting for the outcomes on this thread.
    public func ingest(_ events: [EventInput]) throws -> [EventOutcome] {
        let answer = Mutex<Result<[EventOutcome], any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        submit(events) { result in
            answer.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        // The completion stored a result before signalling: the fallback cannot be reached.
        return try (answer.withLock { $0 } ?? .failure(IngestRefusal.shuttingDown)).get()
    }

    /// How many requests wait for a transaction (tests watch it).
    var queuedRequests: Int { state.withLock { $0.queue.count } }

    /// Stops taking events, lets the committers finish what they took, and waits for them until
    /// `deadline` at the latest (a committer still waiting for the database then is left to end
    /// with the process: its requests are not answered, so nothing is acknowledged that is not
    /// committed).
    public func shutdown(by deadline: ContinuousClock.Instant) {
        let orphans = state.withLock { state -> [Submission] in
            state.stopped = true
            return state.queue.removeAll()
        }
        for submission in orphans {
            submission.completion(.failure(IngestRefusal.shuttingDown))
        }
        watchdogStop.signal()
        // One wake-up per committer: each finds the queue stopped and returns. (A committer busy
        // with a transaction consumes its wake-up later, or finds `stopped` before it waits.)
        for _ in 0..<committers { work.signal() }
        _ = finished.wait(timeout: .now() + deadline.remaining.dispatchInterval)
    }

    private func runCommitter(_ number: Int) {
        while true {
            // Take what can be taken, and wait for a new request only when nothing can: a request
            // left queued because it shares rows with another committer's transaction is taken by
            // that committer when it comes back here, if no one took it before.
            let (batch, stopped) = state.withLock { state in
                (state.queue.take(for: number, maximumEvents: maximumBatchEvents, grouped: topology.groupsTransactions), state.stopped)
            }
            if batch.isEmpty {
                if stopped { return }
                work.wait()
                continue
            }
            commit(batch)
        }
    }

    /// Answers `503` to requests that waited more than `queueWait` for a committer (all of them
    /// busy, with the database slow or unreachable); their events never reach the database. Looks
    /// every tenth of `queueWait` (at least every 250 ms), so a request waits at most that much longer.
    private func runWatchdog() {
        let interval = min(max(queueWait / 10, .milliseconds(10)), .milliseconds(250))
        while true {
            let stopping = watchdogStop.wait(timeout: .now() + interval.dispatchInterval) == .success
            if stopping { return }
            let now = DispatchTime.now().uptimeNanoseconds
            let expired = state.withLock { $0.queue.removeAll { $0.deadline <= now } }
            for submission in expired {
                submission.completion(.failure(IngestRefusal.waitedTooLong(queueWait)))
            }
        }
    }

    private func commit(_ batch: [Submission]) {
        // The items of a batch share their group (`CommitQueue.take`).
        let group = batch.first?.group
        do {
            let outcomes = try runTransaction(batch.flatMap(\.events), group: group)
            var offset = 0
            for submission in batch {
                submission.completion(.success(Array(outcomes[offset..<(offset + submission.events.count)])))
                offset += submission.events.count
            }
        } catch let error as PostgresError where error.isConnectionGone || batch.count == 1 {
            batch.forEach { $0.completion(.failure(error)) }
        } catch {
            // A statement failed for a reason that is not the connection: commit each request on
            // its own so that one request's trouble is not every request's.
            logger.error("group commit failed; retrying requests one by one", [("error", "\(error)"), ("requests", String(batch.count))])
            for submission in batch {
                submission.completion(Result { try runTransaction(submission.events, group: group) })
            }
        }
    }

    /// Runs one transaction (which the store runs again itself when a concurrent one got in its way),
    /// on a connection the pool holds back for the committers (`Borrower.reserved`): readiness
    /// probes, reports, feeds and maintenance cannot take the last of them. A routed group runs on
    /// its node's pool (`ShardRouter`); when the node cannot be reached (nothing was sent), the
    /// transaction runs through `pool` instead, which Citus routes on, and the map is read again.
    private func runTransaction(_ events: [EventInput], group: TransactionGroup?) throws -> [EventOutcome] {
        let receivedAt: EventStore.ReceivedAt = clock.map { .fixed($0.now()) } ?? .databaseClock
        if let node = group?.node, let router = topology.router, let nodePool = router.pool(forGroup: node) {
            do {
                return try nodePool.withConnection(for: .reserved) { connection in
                    try store.ingest(events, receivedAt: receivedAt, on: connection, onShardNode: true)
                }
            } catch let error as PostgresError where error.kind == .connectionFailed {
                router.nodeUnreachable(group: node)
            }
        }
        return try pool.withConnection(for: .reserved) { connection in
            try store.ingest(events, receivedAt: receivedAt, on: connection)
        }
    }
}

/// Why group commit answered a request without its transaction: nothing of it was stored.
enum IngestRefusal: Unavailability, Equatable {
    /// The server is stopping.
    case shuttingDown
    /// Every committer was busy (the database slow or unreachable) for this long.
    case waitedTooLong(Duration)

    var message: String {
        switch self {
        case .shuttingDown: "The server is shutting down; nothing was stored. Retry the same request."
        case .waitedTooLong(let wait): "The events waited more than \(wait) for the database; nothing was stored. Retry the same request."
        }
    }
}
