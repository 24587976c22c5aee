@testable import AdTallyClient
import Foundation
import Testing

@Suite(.timeLimit(.minutes(5))) struct CallerThreadTests {
    /// With the disk stalled and the server never answering, 2,000 calls on one thread all return;
    /// nothing of the journal or the network ran on that thread.
    @Test func callsNeverWaitForDiskOrNetwork() async throws {
        let journal = StalledJournal()
        let fixture = try TrackerFixture(storage: .directory(FileManager.default.temporaryDirectory), journal: journal) {
            $0.journalInterval = .zero
            $0.maxBatch = 50
        }
        let returned = DispatchSemaphore(value: 0)
        let callerName = Lock<String>("")
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
        await fixture.shutdown()
    }
}
