#if canImport(Glibc)
import Glibc
#endif

/// Medians, timers and the units the benchmark prints.
enum Measurements {
    /// CPU seconds of the calling thread: what a step costs, whatever else the machine runs.
    static func threadCPU() -> Double { cpu(CLOCK_THREAD_CPUTIME_ID) }
    /// CPU seconds of the whole process (every thread of the tracker).
    static func processCPU() -> Double { cpu(CLOCK_PROCESS_CPUTIME_ID) }

    private static func cpu(_ clock: clockid_t) -> Double {
        var time = timespec()
        clock_gettime(clock, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// The calling thread's CPU seconds for `body`.
    static func cpuTime(_ body: () throws -> Void) rethrows -> Double {
        let start = threadCPU()
        try body()
        return threadCPU() - start
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Times `body` and returns its seconds.
    static func time(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        return seconds(ContinuousClock.now - start)
    }

    static func format(_ value: Double, decimals: Int = 1) -> String {
        var text = String(Int((value * pow10(decimals)).rounded()))
        guard decimals > 0 else { return grouped(text) }
        let negative = text.hasPrefix("-")
        if negative { text.removeFirst() }
        while text.count <= decimals { text = "0" + text }
        let cut = text.index(text.endIndex, offsetBy: -decimals)
        return (negative ? "-" : "") + grouped(String(text[..<cut])) + "." + text[cut...]
    }

    private static func pow10(_ n: Int) -> Double { (0..<n).reduce(1.0) { value, _ in value * 10 } }

    private static func grouped(_ digits: String) -> String {
        var out = ""
        for (index, character) in digits.reversed().enumerated() {
            if index > 0, index % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return String(out.reversed())
    }
}
