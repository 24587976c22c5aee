@testable import AdTallyClient
import Foundation

/// A transport that never returns, not even when its task is cancelled, until `release()`: the
/// worst an app's own transport could do. Shutdown must not wait for it.
final class DeafTransport: EventTransport {
    private struct State {
        var waiting: [CheckedContinuation<TransportResult, Never>] = []
        var released = false
        var calls = 0
    }

    private let state = Lock(State())
    private let called = FirstOutcome<Bool>()

    func send(_ request: TransportRequest) async -> TransportResult {
        await withCheckedContinuation { (continuation: CheckedContinuation<TransportResult, Never>) in
            let released = state.withLock { state -> Bool in
                state.calls += 1
                if !state.released { state.waiting.append(continuation) }
                return state.released
            }
            called.settle(true)
            if released { continuation.resume(returning: .failure("released")) }
        }
    }

    /// Returns once a request is in flight.
    func waitForARequest() async { _ = await called.value }

    var calls: Int { state.withLock { $0.calls } }

    /// Ends every request, now and later, with a failure.
    func release() {
        let waiting = state.withLock { state -> [CheckedContinuation<TransportResult, Never>] in
            state.released = true
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for continuation in waiting { continuation.resume(returning: .failure("released")) }
    }
}
