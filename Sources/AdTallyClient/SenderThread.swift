import Foundation

/// The thread the sender loop runs on, as a task executor. With the loop on a thread of its own, a
/// transport may do its blocking socket calls right there (`PlainHTTPTransport` does): a request
/// then costs no hop to another thread and back, which on a busy machine is a scheduling delay each
/// way, the larger part of the tracker's time between two requests. Every other task runs where it
/// would anyway.
///
/// `stop()` never blocks: the thread ends by itself once the jobs enqueued before it have run, and
/// `waitUntilEnded()` suspends (it holds no thread) until it has. A job that arrives after the end
/// (a request the tracker abandoned at shutdown, answered late) runs on the global concurrent
/// executor instead, so no task that prefers this executor is ever stranded.
///
/// A task can only be asked to run on it where Swift has task executors (iOS 18 / macOS 15 /
/// tvOS 18 / watchOS 11 / visionOS 2, and Linux), so only there is one made: `init`, the loop and
/// the `TaskExecutor` conformance carry that availability, while the class itself is there from
/// the library's floor (iOS 16 / macOS 13) for the tracker to hold an optional one. On an earlier
/// system the tracker has none and its sender loop runs on the global executor, as every transport
/// but `PlainHTTPTransport` does anyway.
final class SenderThread: Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var stopping = false
        var ended = false
        var endWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private enum Step {
        case run(UnownedJob)
        case idle
        case end([CheckedContinuation<Void, Never>])
    }

    private let state = Lock(State())
    /// Counts jobs enqueued and the stop: the thread sleeps here, not on the cooperative pool.
    private let ready = DispatchSemaphore(value: 0)

    /// Whether the calling thread is a sender thread, where blocking for a request is allowed.
    static var isCurrent: Bool { Thread.current.threadDictionary[key] != nil }
    private static let key = "AdTallyClient.SenderThread"

    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    /// Asks the thread to end once the jobs enqueued so far have run; returns at once.
    func stop() {
        state.withLock { $0.stopping = true }
        ready.signal()
    }

    /// Whether the thread has ended (after `stop()`, its last job run).
    var hasEnded: Bool { state.withLock { $0.ended } }

    /// Returns once the thread has ended; it suspends the calling task, it blocks no thread.
    func waitUntilEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { state -> Bool in
                if !state.ended { state.endWaiters.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() }
        }
    }

    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
    private func run() {
        Thread.current.threadDictionary[Self.key] = true
        let executor = asUnownedTaskExecutor()
        while true {
            ready.wait()
            // Every job and the stop signal once, so a wake-up finds a job, the stop, or (after a
            // job taken on an earlier wake-up) nothing; the queue is read under the lock that
            // `enqueue` appends under, so no job is left behind when the thread ends.
            let step = state.withLock { state -> Step in
                if !state.jobs.isEmpty { return .run(state.jobs.removeFirst()) }
                guard state.stopping else { return .idle }
                state.ended = true
                defer { state.endWaiters.removeAll() }
                return .end(state.endWaiters)
            }
            switch step {
            case let .run(job):
                job.runSynchronously(on: executor)
            case .idle:
                continue
            case let .end(waiters):
                Thread.current.threadDictionary[Self.key] = nil
                for waiter in waiters { waiter.resume() }
                return
            }
        }
    }
}

@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
extension SenderThread: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let taken = state.withLock { state -> Bool in
            guard !state.ended else { return false }
            state.jobs.append(job)
            return true
        }
        if taken {
            ready.signal()
        } else {
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
        }
    }
}
