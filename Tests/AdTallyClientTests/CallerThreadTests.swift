@testable import AdTallyClient
import Foundation
import Synchronization
import Testing

/// A journal whose disk never finishes a write until released, and which notes the threads that
/// call it.
final class StalledJournal: EventJournal {
    private let queue = DispatchQueue(label: "StalledJournal")
    private let release = DispatchSemaphore(value: 0)
    private let callers = Mutex<Set<String>>([])

    private func note() { callers.withLock { _ = $0.insert(Thread.current.description) } }
    var callingThreads: Set<String> { callers.withLock { $0 } }

    func load(_ completion: @escaping @Sendable (Result<JournalContents, TrackerError>) -> Void) {
        note()
        queue.async { completion(.success(.empty)) }
    }

    func append(_ records: [JournalRecord], durable: Bool, _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void) {
        note()
        queue.async { [release] in
            release.wait()
            release.signal()
            completion(.success(0))
        }
    }

    func rewrite(_ records: [JournalRecord], _ completion: @escaping @Sendable (Result<Int, TrackerError>) -> Void) {
        append(records, durable: true, completion)
    }

    func close(_ completion: @escaping @Sendable () -> Void) { queue.async { completion() } }

    func unstall() { release.signal() }
}

@Suite struct CallerThreadTests {
    /// With the disk stalled and the server never answering, 2,000 calls on one thread all return;
    /// nothing of the journal or the network ran on that thread.
    @Test func callsNeverWaitForDiskOrNetwork() async throws {
        let journal = StalledJournal()
        let fixture = try TrackerFixture(storage: .directory(FileManager.default.temporaryDirectory), journal: journal) {
            $0.journalInterval = .zero
            $0.maxBatch = 50
        }
        let returned = DispatchSemaphore(value: 0)
        let callerName = Mutex<String>("")
        let tracker = fixture.tracker
        let caller = Thread {
            callerName.withLock { $0 = Thread.current.description }
            for n in 0..<2000 { _ = try? tracker.impression(adID: "ad-\(n % 50)") }
            returned.signal()
        }
        caller.start()
        // A bound, not a delay: the calls take milliseconds; a call stuck on the disk or the network
        // would never return while both are stalled.
        let finished = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { continuation.resume(returning: returned.wait(timeout: .now() + 10) == .success) }
        }
        #expect(finished, "a call waited for the stalled disk or server")
        #expect(fixture.tracker.statistics.tracked == 2000)
        #expect(!journal.callingThreads.contains(callerName.withLock { $0 }))
        journal.unstall()
        await fixture.tracker.shutdown()
    }
}
