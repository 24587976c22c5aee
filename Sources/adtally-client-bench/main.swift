// adtally-client-bench: what AdTallyClient costs (scripts/bench-client runs it).
//
//   adtally-client-bench cost [ROUNDS]
//       the client's cost per event, step by step, with no server
//   adtally-client-bench throughput URL ADMIN_TOKEN [BATCHES] [ROUNDS]
//       batches of 50 on one connection against a running AdTally: a plain loop vs the tracker
import Foundation

func usage() -> Never {
    FileHandle.standardError.write(Data("usage: adtally-client-bench cost [ROUNDS] | throughput URL ADMIN_TOKEN [BATCHES] [ROUNDS]\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments
let environment = ProcessInfo.processInfo.environment
let work = URL(fileURLWithPath: environment["BENCH_DIR"] ?? NSTemporaryDirectory())
    .appendingPathComponent("adtally-client-bench-\(getpid())")
// The journal of the throughput runs: tmpfs where there is one. A phone's journal is not on the
// server's disk; on one disk, the tracker's fsyncs would queue behind PostgreSQL's.
let memoryWork = URL(fileURLWithPath: environment["BENCH_MEMORY_DIR"]
    ?? (FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()))
    .appendingPathComponent("adtally-client-bench-\(getpid())")
defer {
    try? FileManager.default.removeItem(at: work)
    try? FileManager.default.removeItem(at: memoryWork)
}
do {
    switch arguments.count > 1 ? arguments[1] : "" {
    case "cost":
        try await CostBenchmark.run(rounds: arguments.count > 2 ? Int(arguments[2]) ?? 5 : 5, directory: work)
    case "throughput":
        guard arguments.count >= 4, let url = URL(string: arguments[2]) else { usage() }
        let batches = arguments.count > 4 ? Int(arguments[4]) ?? 400 : 400
        let rounds = arguments.count > 5 ? Int(arguments[5]) ?? 3 : 3
        try await ThroughputBenchmark.run(url: url, token: arguments[3], batches: batches, rounds: rounds,
                                          directory: work, memoryDirectory: memoryWork)
    default:
        usage()
    }
} catch {
    FileHandle.standardError.write(Data("adtally-client-bench: \(error)\n".utf8))
    exit(1)
}
