import Foundation
import Synchronization

/// The thread the sender loop runs on, as a task executor. With the loop on a thread of its own, a
/// transport may do its blocking socket calls right there (`PlainHTTPTransport` does): a request
/// then costs no hop to another thread and back, which on a busy machine is a scheduling delay each
/// way, the larger part of the tracker's time between two requests. Every other task runs where it
/// would anyway.
final class SenderThread: TaskExecutor {
    private struct Queue {
        var jobs: [UnownedJob] = []
        var stopped = false
    }

    private let queue = Mutex(Queue())
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// Whether the calling thread is a sender thread, where blocking for a request is allowed.
    static var isCurrent: Bool { Thread.current.threadDictionary[key] != nil }
    private static let key = "AdTallyClient.SenderThread"

    init(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        ready.signal()
    }

    /// Ends the thread once the jobs enqueued so far have run (the sender loop has returned).
    func stop() {
        queue.withLock { $0.stopped = true }
        ready.signal()
        finished.wait()
    }

    private func run() {
        Thread.current.threadDictionary[Self.key] = true
        let executor = asUnownedTaskExecutor()
        while true {
            ready.wait()
            let (job, stopped) = queue.withLock { queue -> (UnownedJob?, Bool) in
                queue.jobs.isEmpty ? (nil, queue.stopped) : (queue.jobs.removeFirst(), false)
            }
            if let job { job.runSynchronously(on: executor) }
            if stopped { break }
        }
        finished.signal()
    }
}
