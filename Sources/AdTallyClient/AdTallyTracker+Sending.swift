import Foundation

/// The sender loop: one request in flight at a time. It sends the oldest ready batch; cuts the next
/// one from the waiting events once `maxBatch` wait, the oldest has waited `maxDelay`, or a flush
/// asks (and while a request is in flight it prepares the next batch, so that the journal write of
/// batch n+1 overlaps the request of batch n); and after a failure waits out the backoff.
extension AdTallyTracker {
    private enum SenderStep {
        case send(QueuedBatch, [TrackedEvent], Data?)
        case probe
        case again
        case wait(Duration?)
        case stop
    }

    func runSender() async {
        await waitUntilLoaded()
        while true {
            let now = configuration.clock.uptime()
            let (step, notices) = state.withLock { state in (nextSenderStep(&state, now: now), !state.notices.isEmpty || !state.queueFullDrops.isEmpty) }
            if notices { finish([], []) } // reports gathered elsewhere (drops from a full queue)
            switch step {
            case .stop:
                return
            case .again:
                continue
            case let .wait(deadline):
                await senderWakeup.wait(until: deadline, clock: configuration.clock)
            case .probe:
                await probeClock()
            case let .send(batch, events, encoded):
                let body = encoded ?? EventEncoder.batchBody(events, correction: batch.correction)
                if encoded == nil { state.withLock { $0.bodies[batch.id] = body } }
                await send(batch, events: events, body: body)
            }
        }
    }

    private func nextSenderStep(_ state: inout TrackerState, now: Duration) -> SenderStep {
        if state.stopping { return .stop }
        if let retryAt = state.retryAt, retryAt > now { return .wait(retryAt) }
        if let batch = state.queue.nextReadyBatch {
            state.queue.setPhase(.inFlight, of: batch.id)
            if batchIsDue(state, now: now), state.queue.batchesNotInFlight == 0, !needsClockProbe(state) {
                cutBatch(&state, now: now)
            }
            if state.bodies.count > state.queue.batches.count + 16 {
                // Bodies of batches dropped from a full queue.
                let live = Set(state.queue.batches.map(\.id))
                state.bodies = state.bodies.filter { live.contains($0.key) }
            }
            return .send(batch, state.queue.events(of: batch), state.bodies[batch.id])
        }
        if state.queue.batchesNotInFlight > 0 { return .wait(nil) } // its journal write signals
        guard !state.queue.hasBatchInFlight else { return .wait(nil) }
        guard batchIsDue(state, now: now) else {
            return .wait(state.queue.oldestWaitingSince.map { $0 + configuration.maxDelay })
        }
        if needsClockProbe(state) { return .probe }
        cutBatch(&state, now: now)
        return .again
    }

    /// No batch is cut before the server's clock is known (or known to be unknowable), so that its
    /// events get a corrected `occurred_at`.
    private func needsClockProbe(_ state: TrackerState) -> Bool {
        configuration.correctsClock && state.estimator.correction == nil && !state.probeAnswered
    }

    private func batchIsDue(_ state: TrackerState, now: Duration) -> Bool {
        guard let first = state.queue.firstWaitingSequence else { return false }
        if state.queue.waitingCount >= configuration.maxBatch || first <= state.flushThrough { return true }
        return state.queue.oldestWaitingSince.map { $0 + configuration.maxDelay <= now } ?? false
    }

    /// Cuts a batch from the head of the waiting events; with a journal, its record (and its events
    /// not yet written) goes to the journal first, and it is sent once that write is durable, so that
    /// a restart resends exactly this batch.
    private func cutBatch(_ state: inout TrackerState, now: Duration) {
        let correction = configuration.correctsClock ? state.estimator.correction : nil
        guard let (batch, unwritten) = state.queue.cutBatch(maxCount: configuration.maxBatch,
                                                            maxBytes: configuration.maxBatchBytes,
                                                            correction: correction, durable: journal != nil)
        else { return }
        guard let journal else { return }
        var records = unwritten.map { JournalRecord.event(sequence: $0.0, $0.1) }
        records.append(.batch(id: batch.id, correction: batch.correction, sequences: batch.sequences))
        writeBatchRecords(records, batches: [(batch, state.queue.events(of: batch))], sequences: unwritten.map(\.0),
                          to: journal, state: &state)
    }

    /// Journals batch records; once they are durable, encodes the batches' bodies there, on the
    /// journal's queue (off the sender's path while a request is in flight), and makes them ready.
    private func writeBatchRecords(_ records: [JournalRecord], batches: [(QueuedBatch, [TrackedEvent])],
                                   sequences: [UInt64], to journal: any EventJournal, state: inout TrackerState) {
        let writeID = state.registerWrite(oldest: sequences.first ?? .max)
        journal.append(records, durable: true) { [self] result in
            let bodies = batches.map { batch, events in (batch.id, EventEncoder.batchBody(events, correction: batch.correction)) }
            // Sent even when the write failed (reported): exactly-once rests on the event ids, and
            // the batch record only keeps a restart from cutting the events differently.
            self.state.withLock { state in
                for (id, body) in bodies where state.queue.batch(id)?.phase == .journaling {
                    state.queue.setPhase(.ready, of: id)
                    state.bodies[id] = body
                }
            }
            journalWriteFinished(writeID, sequences: sequences, result: result, loopWrite: false)
            senderWakeup.signal()
        }
    }

    /// Before the first batch of a run, one `GET /healthz` to learn the server's clock from its
    /// `Date` header, so that even the first events carry a corrected `occurred_at`.
    private func probeClock() async {
        let sentAt = Self.milliseconds(configuration.clock.now())
        guard let result = await exchange(.clockProbe) else { return }
        let receivedAt = Self.milliseconds(configuration.clock.now())
        let unit = configuration.jitter()
        let now = configuration.clock.uptime()
        let flushes = state.withLock { state -> [(TrackerState.FlushWaiter, FlushResult)] in
            switch result {
            case let .response(response):
                observeDate(response, sentAt: sentAt, receivedAt: receivedAt, state: &state)
                state.probeAnswered = true
                succeeded(&state)
                return []
            case let .failure(reason):
                return failedAttempt("clock probe: \(reason)", retryAfter: nil, unit: unit, now: now, state: &state)
            }
        }
        finish(flushes, [])
    }

    private func observeDate(_ response: TransportResponse, sentAt: Int64, receivedAt: Int64, state: inout TrackerState) {
        guard configuration.correctsClock, let date = response.header("date").flatMap(CivilTime.seconds(imfFixdate:)) else { return }
        state.estimator.observe(dateSeconds: date, sentAt: sentAt, receivedAt: receivedAt)
    }

    /// Sends `request` and returns the transport's result, or nil when the tracker is shut down
    /// before the request or while it is in flight (the sender then stops; the request's batch stays
    /// in the journal, to be resent after the next start).
    private func exchange(_ request: TransportRequest) async -> TransportResult? {
        let inFlight = RequestInFlight()
        let registered = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.inFlight = inFlight
            return true
        }
        guard registered else { return nil }
        inFlight.start(request, through: transport, on: transportThread)
        let result = await inFlight.result()
        state.withLock { state in
            if state.inFlight === inFlight { state.inFlight = nil }
        }
        return result
    }

    private func send(_ batch: QueuedBatch, events: [TrackedEvent], body: Data) async {
        let sentAt = Self.milliseconds(configuration.clock.now())
        guard let result = await exchange(.events(body)) else { return }
        let receivedAt = Self.milliseconds(configuration.clock.now())
        if case let .response(response) = result, response.status == 200 {
            // Answered. Reading the answer waits on the answers queue, off the sender's path, so that
            // the next batch goes out at once; until then the batch stays in the queue, not sendable.
            state.withLock { state in
                observeDate(response, sentAt: sentAt, receivedAt: receivedAt, state: &state)
                state.queue.setPhase(.answered, of: batch.id)
                succeeded(&state)
            }
            answers.async { [self] in readAnswer(response, of: batch, events: events) }
            return
        }
        let answer = BatchAnswer.classify(result, events: events)
        let unit = configuration.jitter()
        let now = configuration.clock.uptime()
        let (failedFlushes, delivered) = state.withLock {
            state -> ([(TrackerState.FlushWaiter, FlushResult)], [TrackerState.FlushWaiter]) in
            if case let .response(response) = result {
                observeDate(response, sentAt: sentAt, receivedAt: receivedAt, state: &state)
            }
            var failed: [(TrackerState.FlushWaiter, FlushResult)] = []
            switch answer {
            case .answered:
                break // a 200, handled above
            case let .retry(reason, retryAfter):
                state.queue.setPhase(.ready, of: batch.id)
                failed = failedAttempt(reason, retryAfter: retryAfter, unit: unit, now: now, state: &state)
            case .tooLarge:
                if let (first, second) = state.queue.split(batch.id, durable: journal != nil) {
                    state.bodies[batch.id] = nil
                    if let journal {
                        let records: [JournalRecord] = [first, second].map {
                            .batch(id: $0.id, correction: $0.correction, sequences: $0.sequences)
                        }
                        writeBatchRecords(records, batches: [first, second].map { ($0, state.queue.events(of: $0)) },
                                          sequences: [], to: journal, state: &state)
                    }
                } else {
                    refuse(batch, reason: .refused(status: 413, code: "payload_too_large", message: nil), now: now, state: &state)
                }
                succeeded(&state)
            case let .refused(status, code, message):
                refuse(batch, reason: .refused(status: status, code: code, message: message), now: now, state: &state)
                succeeded(&state)
            }
            return (failed, state.deliveredFlushWaiters())
        }
        finish(failedFlushes, delivered)
    }

    /// On the answers queue: the outcomes of a batch answered `200`, matched to its events. An
    /// answer that does not fit the batch is not taken for one: the batch is sent again (after the
    /// one the sender may have sent meanwhile).
    private func readAnswer(_ response: TransportResponse, of batch: QueuedBatch, events: [TrackedEvent]) {
        let outcomes = BatchAnswer.outcomes(of: response.body, for: events)
        let unit = configuration.jitter()
        let now = configuration.clock.uptime()
        let (failed, delivered) = state.withLock {
            state -> ([(TrackerState.FlushWaiter, FlushResult)], [TrackerState.FlushWaiter]) in
            var failed: [(TrackerState.FlushWaiter, FlushResult)] = []
            if let outcomes {
                close(batch, now: now, state: &state)
                state.statistics.record(outcomes)
                state.notify(.answered(outcomes))
            } else {
                state.queue.setPhase(.ready, of: batch.id)
                let retryAfter = BackoffPolicy.retryAfter(response.header("retry-after"), date: response.header("date"))
                failed = failedAttempt("200 with an answer that does not match the batch", retryAfter: retryAfter,
                                       unit: unit, now: now, state: &state)
            }
            return (failed, state.deliveredFlushWaiters())
        }
        finishNow(failed, delivered)
        senderWakeup.signal()
    }

    /// Hands the reports to the observer and then ends the flushes that are over, in that order (the
    /// observer hears of an answer before a flush waiting for it returns), on the answers queue, so
    /// that the observer is called from one queue, in order.
    func finish(_ failed: [(TrackerState.FlushWaiter, FlushResult)], _ delivered: [TrackerState.FlushWaiter]) {
        answers.async { [self] in finishNow(failed, delivered) }
    }

    private func finishNow(_ failed: [(TrackerState.FlushWaiter, FlushResult)], _ delivered: [TrackerState.FlushWaiter]) {
        deliverNotices()
        for (waiter, outcome) in failed { waiter.continuation.resume(returning: outcome) }
        for waiter in delivered { waiter.continuation.resume(returning: .delivered) }
    }

    private func close(_ batch: QueuedBatch, now: Duration, state: inout TrackerState) {
        _ = state.queue.close(batch.id)
        state.bodies[batch.id] = nil
        if journal != nil, state.addPendingRecords([.batchClosed(id: batch.id)], now: now) { journalWakeup.signal() }
    }

    private func refuse(_ batch: QueuedBatch, reason: DropReason, now: Duration, state: inout TrackerState) {
        let events = state.queue.events(of: batch)
        close(batch, now: now, state: &state)
        state.statistics.droppedRefused += events.count
        state.notify(.dropped(events.map(DroppedEvent.init), because: reason))
    }

    private func succeeded(_ state: inout TrackerState) {
        state.failures = 0
        state.retryAt = nil
    }

    /// Counts a failure, schedules the retry, and takes the flushes that end at a failure with
    /// what they return.
    private func failedAttempt(_ reason: String, retryAfter: Duration?, unit: Double, now: Duration,
                               state: inout TrackerState) -> [(TrackerState.FlushWaiter, FlushResult)] {
        state.failures += 1
        state.statistics.failedAttempts += 1
        let delay = backoff.delay(afterFailures: state.failures, unit: unit, retryAfter: retryAfter)
        state.retryAt = now + delay
        state.lastFailure = reason
        state.notify(.retrying(after: delay, failures: state.failures, reason: reason))
        let ending = state.flushWaiters.filter { !$0.retrying }
        state.flushWaiters.removeAll { !$0.retrying }
        return ending.map { ($0, .willRetry(after: delay, reason: reason)) }
    }

    /// Hands the reports gathered under the lock to the observer, outside it (on the answers queue).
    private func deliverNotices() {
        guard configuration.observer != nil else { return }
        let notices = state.withLock { state -> [TrackerReport] in
            defer {
                state.notices.removeAll()
                state.queueFullDrops.removeAll()
            }
            guard !state.queueFullDrops.isEmpty else { return state.notices }
            return [.dropped(state.queueFullDrops, because: .queueFull)] + state.notices
        }
        guard let observer = configuration.observer else { return }
        for notice in notices { observer(notice) }
    }
}
