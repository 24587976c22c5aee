@testable import AdTallyClient
import Foundation

/// Runs `operation` and returns its result, or nil when `limit` of real time passes first (the
/// operation then goes on, unawaited): a hang becomes a failure. A Dispatch timer keeps the time,
/// so a busy cooperative pool cannot delay the verdict.
func within<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async -> T) async -> T? {
    let outcome = FirstOutcome<T?>()
    let nanoseconds = Int(limit / .nanoseconds(1))
    let timer = DispatchWorkItem { outcome.settle(nil) }
    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds), execute: timer)
    Task { outcome.settle(await operation()) }
    let result = await outcome.value
    timer.cancel()
    return result
}

/// Threads that spin until stopped: a loaded machine beside the test, as two other builds or
/// test runs on a 2-core CI machine would make it.
final class CPUHogs: Sendable {
    private let stopping = AtomicBool(false)
    private let ended: [FirstOutcome<Bool>]

    init(count: Int) {
        ended = (0..<count).map { _ in FirstOutcome<Bool>() }
        for outcome in ended {
            let thread = Thread { [self] in
                var spins = 0
                while !stopping.load() { spins &+= 1 }
                outcome.settle(spins >= 0)
            }
            thread.name = "CPUHog"
            thread.start()
        }
    }

    /// Stops the threads; returns once they have ended.
    func stop() async {
        stopping.store(true)
        for outcome in ended { _ = await outcome.value }
    }
}

/// Runs `body` with `count` CPU hogs beside it, and stops them however it ends.
func withCPUHogs<T>(_ count: Int, _ body: () async throws -> T) async rethrows -> T {
    let hogs = CPUHogs(count: count)
    do {
        let result = try await body()
        await hogs.stop()
        return result
    } catch {
        await hogs.stop()
        throw error
    }
}
