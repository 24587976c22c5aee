@_spi(Benchmark) import AdTallyClient
import Foundation

// print: this file is part of a benchmark executable, and standard output is its report.

/// Batches of 50 on one connection: the same batches posted by a plain loop over one kept-alive
/// connection (the server's own rate) and through the tracker (journal on disk, one request in
/// flight), each run on sessions of its own so that every event is new and billable.
enum ThroughputBenchmark {
    static let batchSize = 50

    /// One way of posting the batches.
    enum Variant: String, CaseIterable {
        case plain = "plain loop"
        case tracker = "tracker"
        case trackerSameDisk = "tracker, journal beside PostgreSQL's"
        case urlSession = "tracker over URLSession"
    }

    static func run(url: URL, token: String, batches: Int, rounds: Int, directory: URL, memoryDirectory: URL) async throws {
        guard let host = url.host, let port = url.port else { throw RawConnection.Failure(description: "no host:port in \(url)") }
        var rates: [Variant: [Double]] = [:]
        var ratios: [Variant: [Double]] = [:]
        for round in 0..<rounds {
            // Alternate the order, so that a drift of the machine's speed favours no variant.
            let order = round % 2 == 0 ? Variant.allCases : Variant.allCases.reversed()
            var rate: [Variant: Double] = [:]
            var cpu: [Variant: Double] = [:]
            for variant in order {
                let prefix = "bench-\(round)-\(Variant.allCases.firstIndex(of: variant) ?? 0)"
                try register(prefix: prefix, batches: batches, host: host, port: port, token: token)
                let cpuStart = Measurements.processCPU()
                defer { cpu[variant] = (Measurements.processCPU() - cpuStart) / Double(batches) }
                switch variant {
                case .plain:
                    rate[variant] = try plainRate(prefix: prefix, batches: batches, host: host, port: port)
                case .tracker, .trackerSameDisk, .urlSession:
                    let parent = variant == .trackerSameDisk ? directory : memoryDirectory
                    rate[variant] = try await trackerRate(url: url, prefix: prefix, batches: batches,
                                                          transport: variant == .urlSession ? URLSessionTransport(baseURL: url) : nil,
                                                          directory: parent.appendingPathComponent("\(prefix)-journal"))
                }
            }
            let plain = rate[.plain] ?? .nan
            var line = "  round \(round + 1):"
            for variant in Variant.allCases {
                let value = rate[variant] ?? .nan
                rates[variant, default: []].append(value)
                ratios[variant, default: []].append(value / plain)
                line += " \(variant.rawValue) \(Measurements.format(value, decimals: 0))"
                line += " [\(Measurements.format((cpu[variant] ?? .nan) * 1e6, decimals: 0)) µs CPU/batch]"
                line += variant == .plain ? ";" : " (\(Measurements.format(value / plain, decimals: 2))x);"
            }
            print(String(line.dropLast()))
        }
        print("medians of \(rounds) rounds, \(batches) batches of \(batchSize) each (events/s, and the median of each round's ratio to the plain loop):")
        for variant in Variant.allCases {
            let rate = Measurements.format(Measurements.median(rates[variant] ?? []), decimals: 0)
            let ratio = Measurements.median(ratios[variant] ?? [])
            var line = "  \(variant.rawValue.padding(toLength: 38, withPad: " ", startingAt: 0)) \(rate)"
            if variant != .plain { line += "  \(Measurements.format(ratio, decimals: 2))x" }
            if variant == .tracker { line += ratio >= 0.9 ? "  (target >= 0.9x: met)" : "  (target >= 0.9x: NOT met)" }
            print(line)
        }
    }

    /// The same batches as the tracker sends, encoded by its encoder, posted in a loop on one
    /// kept-alive connection.
    static func plainRate(prefix: String, batches: Int, host: String, port: Int) throws -> Double {
        let bodies = ClientBenchmarks.bodies(batches: batches, size: batchSize, sessionPrefix: prefix)
        let connection = try RawConnection(host: host, port: port)
        let seconds = try Measurements.time {
            for body in bodies {
                let (status, answer) = try connection.request("POST", "/v1/events", body: body)
                guard status == 200 else {
                    throw RawConnection.Failure(description: "\(status): \(String(decoding: answer, as: UTF8.self))")
                }
            }
        }
        return Double(batches * batchSize) / seconds
    }

    /// One session per batch, each with a feed of `batchSize` ads (`ad-0` at row 0, ...).
    static func register(prefix: String, batches: Int, host: String, port: Int, token: String) throws {
        let connection = try RawConnection(host: host, port: port)
        let ads = (0..<batchSize).map { ad in #"{"ad_id":"ad-\#(ad)","position":\#(ad),"advertiser_id":"bench","url":"https://bench.example/"}"# }
        for index in 0..<batches {
            let session = "\(prefix)-\(index)"
            let body = Data(#"{"snapshot_id":"\#(session)-feed","ads":[\#(ads.joined(separator: ","))]}"#.utf8)
            let (status, answer) = try connection.request("PUT", "/v1/sessions/\(session)/feed", body: body, token: token)
            guard status == 201 else {
                throw RawConnection.Failure(description: "feed registration: \(status) \(String(decoding: answer, as: UTF8.self))")
            }
        }
    }

    /// Tracks the same events as the plain loop's batches and flushes them; events per second from
    /// the first call to the end of the flush.
    static func trackerRate(url: URL, prefix: String, batches: Int, transport: (any EventTransport)?, directory: URL)
        async throws -> Double
    {
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = TrackerConfiguration(endpoint: url, storage: .directory(directory))
        configuration.maxBatch = batchSize
        configuration.maxDelay = .seconds(3600)
        configuration.capacity = max(10_000, batches * batchSize)
        configuration.transport = transport
        let tracker = try AdTallyTracker(configuration: configuration)
        let start = ContinuousClock.now
        for index in 0..<batches {
            let session = "\(prefix)-\(index)"
            try tracker.setSession(session, snapshotID: "\(session)-feed")
            for row in 0..<batchSize { try tracker.impression(adID: "ad-\(row)", position: row) }
        }
        let result = await tracker.flush()
        let seconds = Measurements.seconds(ContinuousClock.now - start)
        let accepted = tracker.statistics.count(status: .accepted)
        await tracker.shutdown()
        guard result == .delivered, accepted == batches * batchSize else {
            throw RawConnection.Failure(description: "tracker: \(result), \(accepted) of \(batches * batchSize) accepted")
        }
        return Double(batches * batchSize) / seconds
    }
}
