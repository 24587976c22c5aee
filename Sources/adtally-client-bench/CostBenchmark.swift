@_spi(Benchmark) import AdTallyClient
import Foundation

// print: this file is part of a benchmark executable, and standard output is its report.

/// The client's cost per event, each step alone, the median of `rounds` rounds. Costs are CPU time
/// (of the calling thread, or for the journal of the whole process), so that other work on a shared
/// machine does not count; the journal's wall time, which includes waiting for `fsync`, is printed too.
enum CostBenchmark {
    static func run(rounds: Int, directory: URL) async throws {
        var enqueue: [Double] = [], journalCPU: [Double] = [], journalWall: [Double] = []
        var encode: [Double] = [], decode: [Double] = [], frame: [Double] = []
        for round in 0..<rounds {
            enqueue.append(try await enqueueCost(events: 200_000))
            let (cpu, wall) = try await journalCost(events: 100_000, directory: directory.appendingPathComponent("cost-\(round)"))
            journalCPU.append(cpu)
            journalWall.append(wall)
            encode.append(Measurements.cpuTime { _ = ClientBenchmarks.encode(size: 50, repeats: 4000) } / 200_000)
            decode.append(Measurements.cpuTime { _ = ClientBenchmarks.decodeAnswer(size: 50, repeats: 1000) } / 50_000)
            frame.append(Measurements.cpuTime { _ = ClientBenchmarks.frameRecords(size: 1000, repeats: 100) } / 100_000)
        }
        print("client cost per event, CPU time (median of \(rounds) rounds):")
        let rows: [(String, [Double])] = [
            ("impression() on the caller's thread (stamp, check, enqueue)", enqueue),
            ("journal, all threads: enqueue, frame, write, fsync (persist)", journalCPU),
            ("  of which framing the journal record", frame),
            ("encode it in a batch of 50 (JSON body)", encode),
            ("read and match its result in the answer to a batch of 50", decode),
        ]
        for (name, values) in rows {
            let perEvent = Measurements.median(values) * 1e6
            print("  \(name.padding(toLength: 62, withPad: " ", startingAt: 0)) \(Measurements.format(perEvent, decimals: 2)) µs")
        }
        let wall = Measurements.median(journalWall) * 1e6
        print("  (journal wall time, fsync waits included: \(Measurements.format(wall, decimals: 2)) µs per event, 4,096 events per write)")
        var memory: [Double] = [], disk: [Double] = []
        for round in 0..<rounds {
            memory.append(try await pipelineRate(storage: .memory))
            disk.append(try await pipelineRate(storage: .directory(directory.appendingPathComponent("pipeline-\(round)"))))
        }
        print("the tracker's own ceiling, batches of 50 against an in-process server that answers at once:")
        print("  journal in memory: \(Measurements.format(Measurements.median(memory), decimals: 0)) events/s; "
            + "on disk: \(Measurements.format(Measurements.median(disk), decimals: 0)) events/s")
    }

    /// Events per second through the whole tracker (cut, journal, encode, send, read the answer).
    static func pipelineRate(storage: TrackerStorage) async throws -> Double {
        defer { if case let .directory(url) = storage { try? FileManager.default.removeItem(at: url) } }
        let tracker = try tracker(storage: storage, answering: true)
        try? await tracker.persist()
        let events = 50_000
        let start = ContinuousClock.now
        for index in 0..<events { try tracker.impression(adID: "ad-\(index % 1000)", position: index % 1000) }
        _ = await tracker.flush()
        let seconds = Measurements.seconds(ContinuousClock.now - start)
        await tracker.shutdown()
        return Double(events) / seconds
    }

    /// With the default settings, and an in-process server that accepts everything (`answering`)
    /// or one that never answers.
    static func tracker(storage: TrackerStorage, answering: Bool) throws -> AdTallyTracker {
        var configuration = TrackerConfiguration(endpoint: URL(string: "http://127.0.0.1:9")!, storage: storage)
        configuration.transport = answering ? EchoTransport() as any EventTransport : StuckTransport()
        configuration.correctsClock = false
        configuration.capacity = 1_000_000 // a burst this long must not drop
        if !answering {
            // Everything stays queued until persist() returns.
            configuration.maxBatch = 500
            configuration.maxDelay = .seconds(3600)
        }
        let tracker = try AdTallyTracker(configuration: configuration)
        try tracker.setSession("bench-session", snapshotID: "bench-feed")
        return tracker
    }

    /// The caller's thread alone, with batches flowing as against a fast server: the queue stays
    /// short, as in an app.
    static func enqueueCost(events: Int) async throws -> Double {
        let tracker = try tracker(storage: .memory, answering: true)
        let seconds = try Measurements.cpuTime {
            for index in 0..<events { try tracker.impression(adID: "ad-\(index % 1000)", position: index % 1000) }
        }
        await tracker.shutdown()
        return seconds / Double(events)
    }

    /// CPU (all threads) and wall seconds per event, from the first call until `persist()` returns.
    static func journalCost(events: Int, directory: URL) async throws -> (Double, Double) {
        defer { try? FileManager.default.removeItem(at: directory) }
        let tracker = try tracker(storage: .directory(directory), answering: false)
        await waitUntilIdle(tracker)
        let cpu = Measurements.processCPU()
        let start = ContinuousClock.now
        for index in 0..<events { try tracker.impression(adID: "ad-\(index % 1000)", position: index % 1000) }
        try await tracker.persist()
        let wall = Measurements.seconds(ContinuousClock.now - start)
        let used = Measurements.processCPU() - cpu
        await tracker.shutdown()
        return (used / Double(events), wall / Double(events))
    }

    /// Lets the tracker read its (empty) journal before the clock starts.
    static func waitUntilIdle(_ tracker: AdTallyTracker) async {
        try? await tracker.persist()
    }
}
