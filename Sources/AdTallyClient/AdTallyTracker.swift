import Foundation

/// Reports an app's ad impressions and clicks to AdTally exactly once, whatever the network does.
///
/// The app tells the tracker its session (the `session_id` the feed backend registered) and, on
/// every refresh, the snapshot now on screen; then calls `impression` and `click` from any thread.
/// Each call stamps the event (a fresh `event_id`, `occurred_at` now, corrected by the server's
/// clock) and enqueues it; nothing else happens on the caller's thread. The tracker's own tasks write
/// events to a journal within `journalInterval`, cut them into batches of up to `maxBatch` and send
/// one batch at a time, retrying the same bytes until the server answers. Because the server drops a
/// repeated `event_id` (it answers the original verdict), a retry, or a batch resent after the app
/// was killed and restarted, is never counted twice.
///
/// A tracker runs until `shutdown()`; make one per app (per journal directory) and keep it.
public final class AdTallyTracker: Sendable {
    /// The settings it was made with (checked).
    public let configuration: TrackerConfiguration
    /// The clocks it stamps and times with; a `ViewabilityTracker` fed from `clock.uptime()` shares them.
    public var clock: any TrackerClock { configuration.clock }

    let transport: any EventTransport
    let journal: (any EventJournal)?
    let backoff: BackoffPolicy
    let state: Lock<TrackerState>
    let senderWakeup = Wakeup()
    let journalWakeup = Wakeup()
    /// The sender loop's own thread, started once nothing in `init` can throw any more (a tracker
    /// that fails to start leaves no thread behind). Nil where Swift has no task executors (before
    /// iOS 18 / macOS 15 / tvOS 18 / watchOS 11 / visionOS 2): the loop then runs on the global
    /// executor, which costs a thread hop per request only to a transport that blocks, and the
    /// tracker never makes one (`PlainHTTPTransport` is its choice on Linux only).
    let senderThread: SenderThread?
    /// Where the transport's `send` runs: on the sender's thread for `PlainHTTPTransport`, which
    /// blocks there on purpose (and wakes at once on cancellation); any other transport (nil) on
    /// the global executor, so that no transport can hold the sender's thread.
    let transportThread: SenderThread?
    /// Where answers are read and reports delivered, in order, off the sender's path.
    let answers = DispatchQueue(label: "AdTallyClient.answers")
    private let tasks = Lock<[Task<Void, Never>]>([])

    /// A tracker with `configuration`; throws when a setting is out of range or the journal
    /// directory cannot be created, opened or locked. Reading the journal happens afterwards, on the
    /// tracker's own queue; events tracked meanwhile wait in memory and come after the journal's.
    public convenience init(configuration: TrackerConfiguration) throws(TrackerError) {
        let journal: (any EventJournal)?
        switch configuration.storage {
        case let .directory(url): journal = try FileJournal(directory: url)
        case .memory: journal = nil
        }
        try self.init(configuration: configuration, journal: journal)
    }

    /// With a journal of the caller's choosing (tests).
    init(configuration: TrackerConfiguration, journal: (any EventJournal)?) throws(TrackerError) {
        self.configuration = try configuration.validated()
        self.journal = journal
        backoff = BackoffPolicy(base: configuration.backoffBase, cap: configuration.backoffCap)
        if let transport = configuration.transport {
            self.transport = transport
        } else {
            self.transport = try Self.defaultTransport(configuration)
        }
        senderThread = Self.makeSenderThread()
        transportThread = transport is PlainHTTPTransport ? senderThread : nil
        var initial = TrackerState(capacity: configuration.capacity)
        initial.reportsWanted = configuration.observer != nil
        state = Lock(initial)
        start()
    }

    private static func defaultTransport(_ configuration: TrackerConfiguration) throws(TrackerError) -> any EventTransport {
        #if !canImport(Darwin)
        if configuration.endpoint.scheme?.lowercased() == "http" {
            return try PlainHTTPTransport(baseURL: configuration.endpoint, timeout: configuration.requestTimeout)
        }
        #endif
        return URLSessionTransport(baseURL: configuration.endpoint, timeout: configuration.requestTimeout)
    }

    /// A sender thread where a task can be asked to run on it (iOS 18 / macOS 15 and later, Linux).
    private static func makeSenderThread() -> SenderThread? {
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
            return SenderThread(name: "AdTallyClient.sender")
        }
        return nil
    }

    private func start() {
        if let journal {
            journal.load { [self] result in finishLoading(result) }
        } else {
            finishLoading(.success(.empty))
        }
        let sender: Task<Void, Never>
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *), let senderThread {
            sender = Task(executorPreference: senderThread) { [self] in await runSender() }
        } else {
            sender = Task { [self] in await runSender() }
        }
        var started = [sender]
        if let journal { started.append(Task { [self] in await runJournal(journal) }) }
        tasks.withLock { $0 = started }
    }

    // MARK: Session and snapshot

    /// Starts reporting for a session: the `session_id` the feed backend registered its feeds
    /// under, and the snapshot on screen, if one is yet. Events already tracked keep their session.
    public func setSession(_ sessionID: String, snapshotID: String? = nil) throws(TrackingError) {
        guard WireIdentifier.isValid(sessionID) else { throw .invalidIdentifier(field: "session_id", value: sessionID) }
        if let snapshotID, !WireIdentifier.isValid(snapshotID) {
            throw .invalidIdentifier(field: "snapshot_id", value: snapshotID)
        }
        state.withLock {
            $0.sessionID = sessionID
            $0.snapshotID = snapshotID
        }
    }

    /// The snapshot now on screen: call it when a refreshed feed is displayed (not when it is
    /// fetched), so that a tap on the old feed still names the old snapshot, which the server's
    /// grace window judges against the feed the user saw.
    public func setSnapshot(_ snapshotID: String) throws(TrackingError) {
        guard WireIdentifier.isValid(snapshotID) else { throw .invalidIdentifier(field: "snapshot_id", value: snapshotID) }
        state.withLock { $0.snapshotID = snapshotID }
    }

    /// The session events are reported for.
    public var sessionID: String? { state.withLock { $0.sessionID } }
    /// The snapshot events name by default.
    public var snapshotID: String? { state.withLock { $0.snapshotID } }

    // MARK: Events

    /// Enqueues an impression of `adID` for the current session and returns its `event_id`.
    /// `snapshotID` defaults to the current snapshot; `position` is the ad's row in the feed; pass
    /// `visibility` as measured by a `ViewabilityTracker` (the server then bills it only if viewable).
    @discardableResult
    public func impression(adID: String, snapshotID: String? = nil, position: Int? = nil,
                           visibility: Visibility? = nil) throws(TrackingError) -> UUID {
        if let visibility, !visibility.isWellFormed { throw .invalidVisibility(visibility) }
        return try enqueue(.impression, adID: adID, snapshotID: snapshotID, position: position, visibility: visibility)
    }

    /// Enqueues a click on `adID` for the current session and returns it: its `event_id` is also
    /// its click id, and `landingURL(for:)` puts that in the ad's URL for the app to open (API 1.5
    /// conversions). A click always names its snapshot: `snapshotID`, or else the current one
    /// (`TrackingError.noSnapshot` when there is none), because the server checks the ad and its
    /// row against that snapshot.
    @discardableResult
    public func click(adID: String, snapshotID: String? = nil, position: Int? = nil) throws(TrackingError) -> TrackedClick {
        let eventID = try enqueue(.click, adID: adID, snapshotID: snapshotID, position: position, visibility: nil)
        return TrackedClick(eventID: eventID, adID: adID)
    }

    private func enqueue(_ type: EventType, adID: String, snapshotID: String?, position: Int?,
                         visibility: Visibility?) throws(TrackingError) -> UUID {
        guard WireIdentifier.isValid(adID) else { throw .invalidIdentifier(field: "ad_id", value: adID) }
        if let snapshotID, !WireIdentifier.isValid(snapshotID) {
            throw .invalidIdentifier(field: "snapshot_id", value: snapshotID)
        }
        if let position, !(0...Int(Int32.max)).contains(position) { throw .invalidPosition(position) }
        let eventID = Self.randomUUID()
        let deviceTime = Self.milliseconds(configuration.clock.now())
        let uptime = configuration.clock.uptime()
        let maxBatch = configuration.maxBatch
        let durable = journal != nil
        let correctsClock = configuration.correctsClock
        let (wakeJournal, wakeSender) = try state.withLock { state throws(TrackingError) -> (Bool, Bool) in
            guard !state.stopping else { throw .stopped }
            guard let sessionID = state.sessionID else { throw .noSession }
            let snapshot = snapshotID ?? state.snapshotID
            if type == .click, snapshot == nil { throw .noSnapshot }
            let event = TrackedEvent(eventID: eventID, type: type, sessionID: sessionID, adID: adID,
                                     snapshotID: snapshot, position: position, visibility: visibility,
                                     deviceTimeMilliseconds: deviceTime,
                                     correctionMilliseconds: correctsClock ? state.estimator.correction : nil)
            state.statistics.tracked += 1
            guard state.loaded else {
                state.preload.append((event, uptime))
                return (false, false)
            }
            return Self.append(event, at: uptime, to: &state, durable: durable, maxBatch: maxBatch)
        }
        if wakeJournal { journalWakeup.signal() }
        if wakeSender { senderWakeup.signal() }
        return eventID
    }

    /// Appends under the lock; says which loops must look again: the journal when its first
    /// unwritten event arrives (it starts the `journalInterval` clock), the sender when a batch's
    /// worth waits or the first event does (it starts the `maxDelay` clock) or something was dropped.
    static func append(_ event: TrackedEvent, at uptime: Duration, to state: inout TrackerState, durable: Bool,
                       maxBatch: Int) -> (journal: Bool, sender: Bool) {
        let hadUnjournaled = state.queue.firstUnjournaledSequence != nil
        let dropped = state.queue.append(event, at: uptime, journaled: !durable)
        if !dropped.isEmpty {
            state.statistics.droppedQueueFull += dropped.events.count
            // Consecutive drops make one report: while the sender waits on a slow request, a full
            // queue drops an event per call, and a report each would pile up as fast.
            if state.reportsWanted { state.queueFullDrops += dropped.events.map(DroppedEvent.init) }
            if durable { state.addPendingRecords(dropped.records, now: uptime) }
        }
        let waiting = state.queue.waitingCount
        return (durable && !hadUnjournaled, waiting == 1 || waiting % maxBatch == 0 || !dropped.isEmpty)
    }

    /// A version 4 UUID from the system's random source.
    static func randomUUID() -> UUID { RandomPool.shared.uuid() }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    // MARK: Waiting

    /// Waits until every event tracked before the call is written to the journal (and `fsync`ed),
    /// or has left the queue. With `.memory` storage it returns at once. Throws when the journal
    /// cannot be written (the events stay queued in memory and the write is retried), and
    /// `TrackerError.stopped` when the tracker was shut down before they could be written.
    public func persist() async throws {
        await waitUntilLoaded()
        guard journal != nil else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let done = state.withLock { state -> Result<Bool, TrackerError> in
                // Shut down before the journal was read: the events tracked meanwhile never reach it.
                guard state.loaded else { return .failure(.stopped) }
                let target = state.queue.lastSequence
                if target <= state.durableThrough { return .success(true) }
                // The journal loop has stopped and no write is under way: nothing would end the wait.
                if state.journalStopped, state.writes.isEmpty { return .failure(.stopped) }
                state.persistWaiters.append(.init(target: target, continuation: continuation))
                return .success(false)
            }
            switch done {
            case .success(true): continuation.resume()
            case .success(false): journalWakeup.signal()
            case let .failure(error): continuation.resume(throwing: error)
            }
        }
    }

    /// Sends every event tracked before the call without waiting for `maxBatch` or `maxDelay` (an
    /// app calls it when it goes to the background) and returns when they have all left the queue,
    /// or when an attempt fails in a way worth retrying (unless `retrying`, which waits through
    /// retries until delivery). A refused batch is dropped and reported, and the flush goes on.
    public func flush(retrying: Bool = false) async -> FlushResult {
        await waitUntilLoaded()
        let id = state.withLock { state -> Int in
            defer { state.nextFlushID += 1 }
            return state.nextFlushID
        }
        let now = configuration.clock.uptime()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<FlushResult, Never>) in
                let immediate = state.withLock { state -> FlushResult? in
                    if state.cancelledFlushes.remove(id) != nil { return .cancelled }
                    if state.stopping { return .stopped }
                    let target = state.queue.lastSequence
                    if state.queue.hasDelivered(through: target) { return .delivered }
                    if !retrying, let retryAt = state.retryAt, retryAt > now {
                        return .willRetry(after: retryAt - now, reason: state.lastFailure)
                    }
                    state.flushThrough = max(state.flushThrough, target)
                    state.flushWaiters.append(.init(id: id, target: target, retrying: retrying, continuation: continuation))
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) } else { senderWakeup.signal() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> TrackerState.FlushWaiter? in
                guard let index = state.flushWaiters.firstIndex(where: { $0.id == id }) else {
                    state.cancelledFlushes.insert(id)
                    return nil
                }
                return state.flushWaiters.remove(at: index)
            }
            waiter?.continuation.resume(returning: .cancelled)
        }
    }

    /// Returns once the journal has been read, or the tracker is stopping (a shutdown does not wait
    /// for a disk that never finishes reading): callers look at `loaded` again.
    func waitUntilLoaded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                let ready = state.loaded || state.stopping
                if !ready { state.loadWaiters.append(continuation) }
                return ready
            }
            if ready { continuation.resume() }
        }
    }

    /// Counts since start, and the queue's size now.
    public var statistics: TrackerStatistics {
        state.withLock { state in
            var statistics = state.statistics
            statistics.pending = state.queue.count + state.preload.count
            statistics.clockCorrection = state.estimator.correction.map { .milliseconds($0) }
            return statistics
        }
    }

    /// Stops the tracker and returns once it has stopped or `timeout` has passed, whichever comes
    /// first. It suspends the calling task while it waits, and blocks no thread.
    ///
    /// At once: later calls to `impression` and `click` throw `.stopped`, pending `flush()` calls
    /// return `.stopped`, the request in flight is cancelled and abandoned whether or not the
    /// transport honours the cancellation (its batch is resent after the next start), and the
    /// sender's thread ends. Then, within `timeout`: the journal is handed what it has not been
    /// handed yet, writes it and is closed. A disk that has not finished by then (stalled, or a slow
    /// `fsync`) finishes on the journal's own queue afterwards, and the directory stays locked until
    /// it has. Returns true when the tracker stopped completely (journal closed) within `timeout`.
    @discardableResult
    public func shutdown(timeout: Duration = .seconds(1)) async -> Bool {
        let deadline = DispatchTime.now() + .nanoseconds(Int(min(max(timeout / .nanoseconds(1), 0), 1e18)))
        let (flushes, loadWaiters, inFlight) = state.withLock { state in
            state.stopping = true
            defer {
                state.flushWaiters.removeAll()
                state.loadWaiters.removeAll()
                state.inFlight = nil
            }
            return (state.flushWaiters, state.loadWaiters, state.inFlight)
        }
        for waiter in flushes { waiter.continuation.resume(returning: .stopped) }
        // Every wait the sender can be in ends now: for the journal to be read, for its wake-up,
        // for the request in flight. So it returns at once, and then its thread ends.
        for waiter in loadWaiters { waiter.resume() }
        inFlight?.abandon()
        senderWakeup.signal()
        let running = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return tasks
        }
        if let sender = running.first { await sender.value }
        if let senderThread {
            senderThread.stop()
            await senderThread.waitUntilEnded()
        }

        // Then the answers the sender left, then the journal loop, which writes what they recorded,
        // then the close; all of which wait for the app's observer or the disk, so only up to the
        // deadline. What is left then goes on by itself.
        let journalLoop = running.dropFirst().first
        let rest = Task { [self] in
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                answers.async { continuation.resume() }
            }
            state.withLock { $0.senderDone = true }
            journalWakeup.signal()
            await journalLoop?.value
            if let journal {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    journal.close { continuation.resume() }
                }
            }
        }
        let stopped = FirstOutcome<Bool>()
        // A Dispatch timer, not a sleeping task: it fires even while the cooperative pool is busy.
        let timer = DispatchWorkItem { stopped.settle(false) }
        DispatchQueue.global().asyncAfter(deadline: deadline, execute: timer)
        Task {
            await rest.value
            stopped.settle(true)
        }
        let finished = await stopped.value
        timer.cancel()
        return finished
    }
}

extension DroppedEvent {
    init(_ event: TrackedEvent) {
        self.init(eventID: event.eventID, type: event.type, sessionID: event.sessionID, adID: event.adID)
    }
}
