import Foundation
import Glibc

/// The `process_*` series every Prometheus client library exports, read from `/proc/self` as
/// client_golang reads them, so that the dashboards and alerts people already have (memory,
/// CPU, descriptors, restarts) work on AdTally unchanged. A value that cannot be read (no `/proc`)
/// is nil and its series is left out rather than reported as 0.
struct ProcessMetrics: Equatable {
    var residentMemoryBytes: Int?
    var cpuSeconds: Double?
    var startTimeSeconds: Double?
    var openFileDescriptors: Int?

    /// Reads the current values; a few small reads of procfs, which never block.
    static func current() -> ProcessMetrics {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        var metrics = ProcessMetrics()
        if let stat = readFile("/proc/self/stat"), let boot = readFile("/proc/stat").flatMap(bootTime), ticks > 0 {
            metrics = parse(stat: stat, clockTicksPerSecond: ticks, pageSize: pageSize, bootTimeSeconds: boot)
        }
        metrics.openFileDescriptors = countOpenDescriptors()
        return metrics
    }

    /// The values in a `/proc/<pid>/stat` line. The second field (the command, in parentheses)
    /// may itself hold spaces and parentheses, so fields are counted from the last `)`: after it
    /// come field 3 (state) onwards; `utime` and `stime` are fields 14 and 15 and `starttime`
    /// field 22, in clock ticks (since boot for `starttime`), and `rss` is field 24, in pages.
    static func parse(stat: String, clockTicksPerSecond: Double, pageSize: Int, bootTimeSeconds: Double) -> ProcessMetrics {
        guard let close = stat.lastIndex(of: ")") else { return ProcessMetrics() }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        func field(_ number: Int) -> Double? {
            let index = number - 3
            return index < fields.count ? Double(fields[index].trimmingCharacters(in: .newlines)) : nil
        }
        var metrics = ProcessMetrics()
        if let user = field(14), let system = field(15) { metrics.cpuSeconds = (user + system) / clockTicksPerSecond }
        if let start = field(22) { metrics.startTimeSeconds = bootTimeSeconds + start / clockTicksPerSecond }
        if let pages = field(24) { metrics.residentMemoryBytes = Int(pages) * pageSize }
        return metrics
    }

    /// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
    static func bootTime(_ procStat: String) -> Double? {
        for line in procStat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// The entries of `/proc/self/fd`, not counting the descriptor that lists them.
    private static func countOpenDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        let own = dirfd(directory)
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let fd = Int32(name), fd != own else { continue }
            count += 1
        }
        return count
    }

    /// A whole procfs file (whose reported size is 0, so it is read to the end).
    private static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                bytes.append(contentsOf: buffer[0..<n])
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
