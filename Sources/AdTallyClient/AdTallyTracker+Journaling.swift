import Foundation

private extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}

/// The journal loop: it writes events once the oldest unwritten one has waited `journalInterval`
/// (or at once for `persist()` and `shutdown()`), so a burst of calls costs one `fsync`, and it
/// compacts the file when it has grown to twice what is still live.
extension AdTallyTracker {
    /// Events per write, so that one write never holds the whole queue in memory twice.
    static let eventsPerWrite = 4096
    /// The journal is compacted once it exceeds this and twice its size after the last compaction.
    static let compactionFloor = 256 * 1024

    private enum JournalStep {
        case wait(Duration?)
        /// With the `persist()` calls that nothing can satisfy any more.
        case stop([TrackerState.PersistWaiter])
    }

    func finishLoading(_ result: Result<JournalContents, TrackerError>) {
        let uptime = configuration.clock.uptime()
        let durable = journal != nil
        let maxBatch = configuration.maxBatch
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            switch result {
            case let .success(contents):
                // Restored events are due at once: they waited a whole restart already.
                state.queue.restore(contents, at: uptime - configuration.maxDelay)
                state.statistics.restored = contents.events.count
                state.journalBytes = contents.fileBytes
                state.bytesAfterCompaction = contents.fileBytes
                if !contents.events.isEmpty || contents.skippedBytes > 0 {
                    state.notify(.restored(events: contents.events.count, batches: contents.batches.count,
                                                   lostBytes: contents.skippedBytes))
                }
                if let version = contents.unsupportedVersion {
                    state.notify(.journalFailed("the journal was written by a newer format (\(version)); set aside"))
                }
                // A torn or damaged stretch is rewritten away before anything is appended after it.
                state.compactionWanted = durable && (contents.skippedBytes > 0 || contents.fileBytes > Self.compactionFloor)
            case let .failure(error):
                state.notify(.journalFailed(error.description))
            }
            state.loaded = true
            let early = state.preload
            state.preload.removeAll()
            for (event, time) in early {
                _ = Self.append(event, at: time, to: &state, durable: durable, maxBatch: maxBatch)
            }
            defer { state.loadWaiters.removeAll() }
            return state.loadWaiters
        }
        for waiter in waiters { waiter.resume() }
        journalWakeup.signal()
        senderWakeup.signal()
    }

    func runJournal(_ journal: any EventJournal) async {
        await waitUntilLoaded()
        let interval = configuration.journalInterval
        while true {
            let now = configuration.clock.uptime()
            let step = state.withLock { state -> JournalStep in
                let step = nextJournalStep(&state, journal: journal, now: now, interval: interval)
                guard case .stop = step else { return step }
                state.journalStopped = true
                return .stop(state.strandedPersistWaiters())
            }
            switch step {
            case let .stop(stranded):
                for waiter in stranded { waiter.continuation.resume(throwing: TrackerError.stopped) }
                return
            case let .wait(deadline):
                await journalWakeup.wait(until: deadline, clock: configuration.clock)
            }
        }
    }

    private func nextJournalStep(_ state: inout TrackerState, journal: any EventJournal, now: Duration,
                                 interval: Duration) -> JournalStep {
        if state.journalBusy { return .wait(nil) }
        if let retryAt = state.journalRetryAt {
            // A disk that failed is not hammered, and a shutdown does not wait for it to recover.
            if state.stopping { return .stop([]) }
            if retryAt > now { return .wait(retryAt) }
            state.journalRetryAt = nil
        }
        // Compaction needs every event handed over; records about events that left need not be
        // written first, since the rewrite no longer holds those events.
        if state.queue.firstUnjournaledSince == nil,
           state.compactionWanted || state.journalBytes > max(Self.compactionFloor, 2 * state.bytesAfterCompaction) {
            compact(&state, journal: journal)
            return .wait(nil)
        }
        let oldest = [state.queue.firstUnjournaledSince, state.pendingRecordsSince].compactMap { $0 }.min()
        guard let oldest else { return state.stopping && state.senderDone ? .stop([]) : .wait(nil) }
        let firstUnwritten = state.queue.firstUnjournaledSequence
        let persistWaiting = firstUnwritten.map { first in state.persistWaiters.contains { $0.target >= first } } ?? false
        guard state.stopping || persistWaiting || oldest + interval <= now else { return .wait(oldest + interval) }

        let events = state.queue.takeUnjournaled(limit: Self.eventsPerWrite)
        var records = events.map { JournalRecord.event(sequence: $0.0, $0.1) }
        records += state.pendingRecords
        state.pendingRecords.removeAll()
        state.pendingRecordsSince = nil
        let sequences = events.map(\.0)
        let writeID = state.registerWrite(oldest: sequences.first ?? .max)
        state.journalBusy = true
        // Records about events that left the queue need no fsync: losing them resends a batch, which
        // the server answers from its ledger.
        journal.append(records, durable: !events.isEmpty) { [self] result in
            journalWriteFinished(writeID, sequences: sequences, result: result, loopWrite: true)
        }
        return .wait(nil)
    }

    private func compact(_ state: inout TrackerState, journal: any EventJournal) {
        state.compactionWanted = false
        state.journalBusy = true
        // The snapshot already reflects every pending record.
        state.pendingRecords.removeAll()
        state.pendingRecordsSince = nil
        journal.rewrite(state.queue.journaledContents().records) { [self] result in
            let failure = self.state.withLock { state -> TrackerError? in
                state.journalBusy = false
                switch result {
                case let .success(size):
                    state.journalBytes = size
                    state.bytesAfterCompaction = size
                    return nil
                case let .failure(error):
                    state.bytesAfterCompaction = state.journalBytes
                    state.notify(.journalFailed(error.description))
                    return error
                }
            }
            if failure != nil { senderWakeup.signal() }
            journalWakeup.signal()
        }
    }

    /// A write of events (and records) finished: the events are durable, or go back to be written
    /// again and the `persist()` calls waiting for them fail.
    func journalWriteFinished(_ writeID: Int, sequences: [UInt64], result: Result<Int, TrackerError>, loopWrite: Bool) {
        let (done, failed, stranded) = state.withLock {
            state -> ([TrackerState.PersistWaiter], [TrackerState.PersistWaiter], [TrackerState.PersistWaiter]) in
            state.finishWrite(writeID)
            if loopWrite { state.journalBusy = false }
            var failed: [TrackerState.PersistWaiter] = []
            switch result {
            case let .success(size):
                state.journalBytes = size
            case let .failure(error):
                state.journalRetryAt = configuration.clock.uptime() + max(configuration.journalInterval, .seconds(1))
                state.statistics.journalFailures += 1
                state.notify(.journalFailed(error.description))
                state.queue.returnUnjournaled(sequences)
                if let oldest = sequences.first {
                    failed = state.persistWaiters.filter { $0.target >= oldest }
                    state.persistWaiters.removeAll { $0.target >= oldest }
                }
            }
            return (state.satisfiedPersistWaiters(), failed, state.strandedPersistWaiters())
        }
        for waiter in done { waiter.continuation.resume() }
        for waiter in stranded { waiter.continuation.resume(throwing: TrackerError.stopped) }
        if case let .failure(error) = result {
            for waiter in failed { waiter.continuation.resume(throwing: error) }
            senderWakeup.signal()
        }
        // The loop waits for its own writes; a batch's write changes nothing it waits for.
        if loopWrite || result.isFailure { journalWakeup.signal() }
    }
}
