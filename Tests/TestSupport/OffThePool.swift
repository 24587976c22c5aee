import Foundation

/// Runs `work`, which blocks (a long database load, a bounded wait on a condition or a child
/// process), on a Dispatch thread, and suspends the calling test until it returns. Swift Testing
/// runs every test on the cooperative thread pool, which on a 2-core machine has two threads: a
/// test that blocks one of them for long holds up every other test of the process (and the
/// timers of the code under test). Issues must be recorded back on the test's task, not in `work`.
public func offThePool<T>(_ work: @escaping @Sendable () throws -> sending T) async throws -> sending T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            do {
                continuation.resume(returning: try work())
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }
}

/// `offThePool` for work that cannot throw.
public func offThePool<T>(_ work: @escaping @Sendable () -> sending T) async -> sending T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: work()) }
    }
}
