@testable import AdTallyClient
import Foundation

/// A journal on a disk that stalls: every write blocks the journal's queue (a thread, as a stuck
/// `write` or `fsync` would) until `unstall()`, and with `stallsLoad` so does reading it at start. It
/// notes the threads that call it, and when its queue closes it.
final class StalledJournal: EventJournal {
    private let queue = DispatchQueue(label: "StalledJournal")
    private let release = DispatchSemaphore(value: 0)
    private let callers = Lock<Set<String>>([])
    private let stallsLoad: Bool
    private let closedOutcome = FirstOutcome<Bool>()

    init(stallsLoad: Bool = false) {
        self.stallsLoad = stallsLoad
    }

    private func note() { callers.withLock { _ = $0.insert(Thread.current.description) } }
    var callingThreads: Set<String> { callers.withLock { $0 } }

    /// Blocks the journal's queue until `unstall()` (the semaphore is passed on, so every later
    /// wait returns too).
    private func stall() {
        release.wait()
        release.signal()
    }

    func load(_ completion: @escaping @Sendable (Result<JournalContents, TrackerError>) -> Void) {
        note()
        queue.async { [self] in
            if stallsLoad { stall() }
            completion(.success(.empty))
        }
    }

    func append(_ records: [JournalRecord], durable: Bool, _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void) {
        note()
        queue.async { [self] in
            stall()
            completion(.success(0))
        }
    }

    func rewrite(_ records: [JournalRecord], _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void) {
        append(records, durable: true, completion)
    }

    func close(_ completion: @escaping @Sendable () -> Void) {
        queue.async { [closedOutcome] in
            closedOutcome.settle(true)
            completion()
        }
    }

    func unstall() { release.signal() }

    /// Returns once the tracker has closed the journal (after every write before the close).
    func waitUntilClosed() async { _ = await closedOutcome.value }
}
