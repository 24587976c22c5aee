import AdTallyClient
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// AdTallyClient against the real server: N impressions of N different ads are tracked, something
/// goes wrong on the way, and AdTally's own report must show exactly N billable impressions and no
/// duplicate (an event delivered twice under a new id would be one; a replay of the same id is not
/// even stored).
extension EndToEnd {
    @Suite(.timeLimit(.minutes(8))) struct ClientDelivery {
        /// Waits for `flush(retrying: true)` at most `timeout` seconds; a hang becomes a failure.
        static func deliver(_ tracker: AdTallyTracker, timeout: TimeInterval = 60) async throws {
            let flush = Task { await tracker.flush(retrying: true) }
            let watchdog = Task {
                try await Task.sleep(for: .seconds(timeout))
                flush.cancel()
            }
            let result = await flush.value
            watchdog.cancel()
            #expect(result == .delivered)
        }

        /// Polls `condition` every 20 ms until it holds (true) or `within` has passed (false): a wait
        /// for something the test observes, never a sleep standing in for it.
        static func eventually(within: Duration, _ condition: () -> Bool) async throws -> Bool {
            let deadline = ContinuousClock.now + within
            while !condition() {
                if ContinuousClock.now >= deadline { return false }
                try await Task.sleep(for: .milliseconds(20))
            }
            return true
        }

        static func track(_ count: Int, on tracker: AdTallyTracker) throws {
            for index in 0..<count { try tracker.impression(adID: "ad-\(index)", position: index) }
        }

        /// The server answers `503` for 5 s (a proxy does, as AdTally does while its database is
        /// gone): the tracker keeps retrying the same batches, through `URLSession`, and every
        /// impression is billed once.
        @Test func throughFiveSecondsOf503() async throws {
            let scenario = try ClientScenario.start(ads: 200)
            defer { scenario.finish() }
            let proxy = try FaultProxy(upstreamPort: scenario.server.port, mode: .unavailable)
            defer { proxy.stop() }
            let tracker = try scenario.tracker(endpoint: proxy.url, storage: .directory(scenario.directory)) {
                $0.transport = URLSessionTransport(baseURL: proxy.url)
            }
            try Self.track(200, on: tracker)
            let flush = Task { await tracker.flush(retrying: true) }
            // The outage lasts until the tracker has been refused four times (about 4 s with its
            // backoff capped at 1 s): it must keep coming back, not give up or wait for a wakeup.
            let started = ContinuousClock.now
            #expect(try await Self.eventually(within: .seconds(30)) { proxy.answeredUnavailable >= 4 },
                    "\(proxy.answeredUnavailable) attempts during the outage")
            let outage = ContinuousClock.now - started
            proxy.setMode(.forward)
            #expect(await flush.value == .delivered)
            #expect(try scenario.impressionTotals() == (200, 0, 0))
            // Four refusals with at most 1 s between them (Retry-After: 1, cap 1 s, jitter below it):
            // far less than the 30 s a runaway backoff would take, with room for a loaded machine.
            #expect(outage < .seconds(15), "four attempts took \(outage)")
            #expect(tracker.statistics.count(status: .accepted) == 200)
            await tracker.shutdown()
        }

        /// The server is killed with SIGKILL while batches flow, and started again on its database.
        @Test func throughAServerKilledAndRestarted() async throws {
            let scenario = try ClientScenario.start(ads: 300)
            defer { scenario.finish() }
            let proxy = try FaultProxy(upstreamPort: scenario.server.port)
            defer { proxy.stop() }
            // The third batch waits in the proxy while the server dies, and is forwarded to the dead one.
            proxy.setMode(.holdRequests, after: 2)
            let tracker = try scenario.tracker(endpoint: proxy.url, storage: .memory)
            try Self.track(300, on: tracker)
            let flush = Task { await tracker.flush(retrying: true) }
            #expect(await offThePool { proxy.waitForEventRequests(3) })
            scenario.server.kill()
            proxy.setMode(.forward)
            // The held batch meets the dead server first; only once the tracker has counted that
            // failure does a new server start (it may even get the old port from the kernel).
            #expect(try await Self.eventually(within: .seconds(30)) { tracker.statistics.failedAttempts >= 1 },
                    "the batch sent to the dead server failed")
            let restarted = try ServerProcess.start(databaseURL: scenario.server.databaseURL)
            defer { restarted.kill() }
            proxy.setUpstream(port: restarted.port)
            #expect(await flush.value == .delivered)
            let after = ClientScenario(server: restarted, session: scenario.session)
            #expect(try after.impressionTotals() == (300, 0, 0))
            await tracker.shutdown()
        }

        /// The server commits two batches but their answers are lost (the proxy drops them): the
        /// retries are answered from the server's ledger with the original verdicts.
        @Test func throughAnswersLostAfterCommit() async throws {
            let scenario = try ClientScenario.start(ads: 200)
            defer { scenario.finish() }
            let proxy = try FaultProxy(upstreamPort: scenario.server.port, mode: .loseAnswers)
            defer { proxy.stop() }
            proxy.setMode(.forward, after: 2)
            let tracker = try scenario.tracker(endpoint: proxy.url, storage: .memory) { $0.maxBatch = 100 }
            try Self.track(200, on: tracker)
            try await Self.deliver(tracker)
            #expect(try scenario.impressionTotals() == (200, 0, 0))
            let bodies = proxy.eventRequests.map(\.body)
            #expect(bodies.count >= 3 && bodies[1] == bodies[0], "the lost batch was resent byte for byte")
            #expect(tracker.statistics.count(status: .accepted) == 200, "replays keep their original verdict")
            await tracker.shutdown()
        }

        /// The app is killed with SIGKILL mid-flush (a batch committed, its answer never seen) and
        /// started again on its journal: it resends that batch byte for byte, then the rest.
        @Test func throughTheClientKilledMidFlush() async throws {
            let scenario = try ClientScenario.start(ads: 300)
            defer { scenario.finish() }
            let proxy = try FaultProxy(upstreamPort: scenario.server.port)
            defer { proxy.stop() }
            proxy.setMode(.holdAnswers, after: 2)
            let arguments = [proxy.url.absoluteString, scenario.directory.path, scenario.session, scenario.snapshot]
            let environment = ProcessInfo.processInfo.environment

            let first = try ChildProcess(executable: Paths.clientHarness, arguments: arguments + ["300", "ad"],
                                         environment: environment)
            defer { first.killAndReap() }
            let persisted = await offThePool { first.stdout.wait(until: Date() + 30) { $0.contains("persisted 300") ? true : nil } }
            #expect(persisted == true, "stdout: \(first.stdout.text) stderr: \(first.stderr.text)")
            #expect(await offThePool { proxy.waitForEventRequests(3) }, "the third batch reached the server")
            first.send(SIGKILL)
            #expect(await offThePool { first.wait(timeout: 10) } == 128 + SIGKILL)
            let unanswered = try #require(proxy.eventRequests.last?.body)
            proxy.setMode(.forward)

            let second = try ChildProcess(executable: Paths.clientHarness, arguments: arguments + ["0", "ad"],
                                          environment: environment)
            defer { second.killAndReap() }
            #expect(await offThePool { second.wait(timeout: 60) } == 0,
                    "stdout: \(second.stdout.text) stderr: \(second.stderr.text)")
            #expect(second.stdout.text.contains("restored "), "\(second.stdout.text)")
            #expect(second.stdout.text.contains("delivered true"), "\(second.stdout.text)")
            #expect(try scenario.impressionTotals() == (300, 0, 0))
            let before = proxy.eventRequests.count
            #expect(proxy.eventRequests.suffix(before - 3).contains { $0.body == unanswered },
                    "the batch whose answer was lost is resent as it was")
        }

        /// Calls made while the server is stalled (it accepts, and never answers) return at once:
        /// the caller's thread never waits for the network or the disk.
        @Test func callsReturnWhileTheServerStalls() async throws {
            let scenario = try ClientScenario.start(ads: 1000)
            defer { scenario.finish() }
            let proxy = try FaultProxy(upstreamPort: scenario.server.port, mode: .holdRequests)
            defer { proxy.stop() }
            let tracker = try scenario.tracker(endpoint: proxy.url, storage: .directory(scenario.directory)) { $0.maxBatch = 20 }
            for index in 0..<20 { try tracker.impression(adID: "ad-\(index)", position: index) }
            #expect(await offThePool { proxy.waitForRequests(1) }, "the tracker's first request is stuck in the stalled server")
            let started = ContinuousClock.now
            for index in 20..<1000 { try tracker.impression(adID: "ad-\(index)", position: index) }
            let took = ContinuousClock.now - started
            // Microseconds a call; one that waited for the stalled server would not return at all.
            #expect(took < .seconds(2), "980 calls took \(took)")
            #expect(proxy.requests.count == 1, "nothing else was sent while the first request hung")
            proxy.setMode(.forward)
            try await Self.deliver(tracker)
            #expect(try scenario.impressionTotals() == (1000, 0, 0))
            await tracker.shutdown()
        }

        /// A phone 15 minutes fast: the server's rule 1 refuses `occurred_at` more than 10 minutes
        /// ahead, so without correction every event is `invalid_event`; with it, all are billed.
        @Test func skewedPhoneClock() async throws {
            let scenario = try ClientScenario.start(ads: 20)
            defer { scenario.finish() }
            let endpoint = URL(string: "http://127.0.0.1:\(scenario.server.port)")!
            let raw = try scenario.tracker(endpoint: endpoint, storage: .memory) {
                $0.clock = SkewedClock(offset: 900)
                $0.correctsClock = false
            }
            for index in 0..<10 { try raw.impression(adID: "ad-\(index)") }
            try await Self.deliver(raw)
            #expect(raw.statistics.count(status: .rejected, reason: "invalid_event") == 10)

            let corrected = try scenario.tracker(endpoint: endpoint, storage: .memory) { $0.clock = SkewedClock(offset: 900) }
            for index in 10..<20 { try corrected.impression(adID: "ad-\(index)") }
            try await Self.deliver(corrected)
            #expect(corrected.statistics.count(status: .accepted) == 10)
            let correction = try #require(corrected.statistics.clockCorrection)
            #expect(correction > .seconds(-902) && correction < .seconds(-898), "\(correction)")
            #expect(try scenario.impressionTotals() == (10, 0, 0))
            await raw.shutdown()
            await corrected.shutdown()
        }
    }
}
