@testable import AdTallyClient
import Foundation
import Testing

/// Issue 28: a tracker's shutdown once never returned on a loaded 2-core machine, and hung the
/// whole test run. Here trackers are started, used and shut down 200 times in a row while two
/// threads spin beside them, with everything a shutdown can meet at once: a journal whose disk
/// stalls (writes, and in some rounds the reading at start), a request in flight to a server that
/// never answers (a real socket) or to a transport that ignores cancellation, a `flush()` and a
/// `persist()` waiting. Every shutdown must return within 2 s, leave no sender thread behind, and
/// once the disk and the transport come back, whatever it left must finish by itself.
@Suite(.timeLimit(.minutes(3))) struct ShutdownStressTests {
    static let rounds = 200
    static let bound: Duration = .seconds(2)

    @Test func shutdownIsBoundedWhateverTheDiskAndTheServerDo() async throws {
        let server = try SilentServer()
        let started = ContinuousClock.now
        let completed = try await withCPUHogs(2) { () async throws -> Int in
            for round in 0..<Self.rounds {
                guard try await Self.round(round, server: server) else { return round }
            }
            return Self.rounds
        }
        await server.stop()
        #expect(completed == Self.rounds, "stopped at round \(completed)")
        let took = ContinuousClock.now - started
        // Informative: a round costs its shutdown's 20 ms timeout and some milliseconds of work.
        print("ShutdownStressTests: \(completed) rounds in \(took)")
    }

    /// One tracker's life; false when it went wrong in a way that would make the next rounds wait
    /// in vain (a shutdown that did not return).
    static func round(_ round: Int, server: SilentServer) async throws -> Bool {
        let deaf = round % 2 == 1
        let stallsLoad = round % 10 == 4
        let journal = StalledJournal(stallsLoad: stallsLoad)
        let deafTransport = DeafTransport()
        let requestsBefore = server.requests
        var configuration = TrackerConfiguration(endpoint: server.url, storage: .memory)
        configuration.journalInterval = .zero
        configuration.maxBatch = 5
        configuration.transport = deaf ? deafTransport : try PlainHTTPTransport(baseURL: server.url)
        let tracker = try AdTallyTracker(configuration: configuration, journal: journal)
        try tracker.setSession("sess-\(round)", snapshotID: "snap-1")
        for n in 0..<20 { try tracker.impression(adID: "ad-\(n)") }
        let flush = Task { await tracker.flush() }
        let persist = Task { try await tracker.persist() }

        // A request in flight first, unless the journal is still being read (nothing is sent then).
        if !stallsLoad {
            let sent = await within(.seconds(30)) { () async -> Bool in
                if deaf { await deafTransport.waitForARequest() } else { await server.waitForRequests(requestsBefore + 1) }
                return true
            }
            #expect(sent != nil, "round \(round): no request went out")
        }

        // Most rounds with a short timeout for the stalled disk, some with the default one.
        let timeout: Duration = round % 100 == 0 ? .seconds(1) : .milliseconds(20)
        let start = ContinuousClock.now
        let stopped = await within(.seconds(30)) { await tracker.shutdown(timeout: timeout) }
        let took = ContinuousClock.now - start
        guard let stopped else {
            Issue.record("round \(round): shutdown did not return within 30 s")
            return false
        }
        #expect(took < bound, "round \(round): shutdown took \(took)")
        #expect(!stopped, "round \(round): the journal is stalled, yet shutdown says it closed it")
        #expect(tracker.senderThread?.hasEnded ?? true, "round \(round): the sender thread outlived the shutdown")
        #expect(await within(.seconds(30)) { await flush.value } == .stopped, "round \(round): flush")

        // The disk and the transport come back: what the shutdown left finishes by itself.
        journal.unstall()
        deafTransport.release()
        #expect(await within(.seconds(30)) { await journal.waitUntilClosed() } != nil,
                "round \(round): the journal was never closed")
        #expect(await within(.seconds(30)) { await persist.result.map { true } } != nil,
                "round \(round): persist() never returned")
        return true
    }
}
