@testable import AdTally
import Foundation
import Testing

/// The `process_*` series are read from `/proc/self/stat` as Prometheus's client libraries read it.
@Suite(.timeLimit(.minutes(3))) struct ProcessMetricsTests {
    /// A stat line whose command holds spaces and parentheses, which must not shift the fields:
    /// utime 250 and stime 150 ticks, starttime 5,000 ticks after boot, rss 1,000 pages.
    static let stat = "4242 (adtally (serve) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 9 0 5000 "
        + "123456789 1000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

    @Test func statFieldsAreCountedFromTheLastParenthesis() {
        let metrics = ProcessMetrics.parse(stat: Self.stat, clockTicksPerSecond: 100, pageSize: 4096, bootTimeSeconds: 1_796_000_000)
        #expect(metrics.cpuSeconds == 4.0)
        #expect(metrics.startTimeSeconds == 1_796_000_050)
        #expect(metrics.residentMemoryBytes == 4_096_000)
    }

    @Test func aLineWithoutItsFieldsGivesNoValues() {
        #expect(ProcessMetrics.parse(stat: "", clockTicksPerSecond: 100, pageSize: 4096, bootTimeSeconds: 0) == ProcessMetrics())
        let cut = ProcessMetrics.parse(stat: "1 (x) S 1 2 3", clockTicksPerSecond: 100, pageSize: 4096, bootTimeSeconds: 0)
        #expect(cut == ProcessMetrics())
    }

    @Test func bootTimeIsTheBtimeLine() {
        #expect(ProcessMetrics.bootTime("cpu  1 2 3\nintr 5\nbtime 1796122264\nprocesses 9\n") == 1_796_122_264)
        #expect(ProcessMetrics.bootTime("cpu  1 2 3\n") == nil)
    }

    /// This test process, read live: it has run for a while, holds memory and descriptors.
    @Test func currentValuesOfThisProcess() throws {
        let metrics = ProcessMetrics.current()
        let started = try #require(metrics.startTimeSeconds)
        #expect(started <= Date().timeIntervalSince1970 + 1)
        #expect(started > Date().timeIntervalSince1970 - 24 * 3600)
        #expect((metrics.residentMemoryBytes ?? 0) > 1 << 20)
        #expect((metrics.openFileDescriptors ?? 0) >= 3)
        #expect((metrics.cpuSeconds ?? -1) > 0)
    }
}
