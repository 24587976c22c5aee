@testable import AdTallyClient
import Foundation

/// Time that moves only when a test says so. Its wall clock is `wallOrigin + uptime`, so a skewed
/// device is a wall origin away from the server's; sleepers wake when `advance` passes their deadline.
final class ManualClock: TrackerClock {
    private struct Sleeper {
        let id: Int
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var uptime: Duration = .zero
        var wallOrigin: Date
        var sleepers: [Sleeper] = []
        var nextID = 0
        var cancelled = Set<Int>()
        /// Tests waiting for someone to go to sleep.
        var watchers: [Int: CheckedContinuation<Duration, any Error>] = [:]
    }

    private let state: Lock<State>

    init(wallOrigin: Date = Date(timeIntervalSince1970: 1_796_000_000)) {
        state = Lock(State(wallOrigin: wallOrigin))
    }

    func now() -> Date { state.withLock { $0.wallOrigin.addingTimeInterval(Self.seconds($0.uptime)) } }
    func uptime() -> Duration { state.withLock { $0.uptime } }

    func sleep(until deadline: Duration) async throws {
        let id = state.withLock { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.uptime { return .success(()) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return nil
                }
                if let outcome {
                    continuation.resume(with: outcome)
                } else {
                    notifyWatchers()
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else {
                    state.cancelled.insert(id)
                    return nil
                }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves uptime (and the wall clock) forward and wakes the sleepers whose deadline passed.
    func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.uptime += duration
            let due = state.sleepers.filter { $0.deadline <= state.uptime }
            state.sleepers.removeAll { $0.deadline <= state.uptime }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }

    func advance(to instant: Duration) {
        let now = uptime()
        if instant > now { advance(by: instant - now) }
    }

    /// The deadlines of the tasks asleep now.
    var sleeperDeadlines: [Duration] { state.withLock { $0.sleepers.map(\.deadline) } }

    private func earliestFutureDeadline(_ state: State) -> Duration? {
        state.sleepers.map(\.deadline).filter { $0 > state.uptime }.min()
    }

    private func notifyWatchers() {
        let (watchers, deadline) = state.withLock { state -> ([CheckedContinuation<Duration, any Error>], Duration?) in
            guard let deadline = earliestFutureDeadline(state) else { return ([], nil) }
            defer { state.watchers.removeAll() }
            return (Array(state.watchers.values), deadline)
        }
        if let deadline { for watcher in watchers { watcher.resume(returning: deadline) } }
    }

    /// Waits until something sleeps with a deadline after now, and returns the earliest such
    /// deadline; fails after `timeout` seconds of real time (a hang becomes a failure).
    func nextSleeper(timeout: TimeInterval = 10) async throws -> Duration {
        let id = state.withLock { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let expiry = Task { [weak self] in
            try? await Task.sleep(for: .seconds(timeout))
            let watcher = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
            watcher?.resume(throwing: TestFailure("nothing went to sleep within \(timeout) s"))
        }
        defer { expiry.cancel() }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Duration, any Error>) in
            let ready = state.withLock { state -> Duration? in
                if let deadline = earliestFutureDeadline(state) { return deadline }
                state.watchers[id] = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Advances to the earliest sleeper's deadline and returns it.
    @discardableResult
    func advanceToNextSleeper() async throws -> Duration {
        let deadline = try await nextSleeper()
        advance(to: deadline)
        return deadline
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// A set-up or synchronisation failure inside a test, with what went wrong.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
