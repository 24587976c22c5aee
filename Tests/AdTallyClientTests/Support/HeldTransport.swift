@testable import AdTallyClient
import Foundation

/// A transport the test answers by hand: every request waits until the test takes it with `next()`
/// and calls `answer`, so that the test decides what the server says and when, and sees exactly
/// what the tracker sent. With `autoAnswer`, requests it returns a result for are answered at once.
final class HeldTransport: EventTransport {
    /// One request waiting for its answer.
    struct Exchange: Sendable {
        let request: TransportRequest
        /// The clock's uptime when it was sent.
        let sentAt: Duration
        let reply: Reply

        func answer(_ result: TransportResult) { reply.resume(result) }
    }

    /// Resumes the sender once, whoever comes first: the test or a cancellation. A result that
    /// comes before the sender waits (a task cancelled before it reached `send`, whose cancellation
    /// handler runs first) is kept for it: dropping it would leave the sender waiting forever.
    final class Reply: Sendable {
        private struct State {
            var continuation: CheckedContinuation<TransportResult, Never>?
            var early: TransportResult?
            var done = false
        }

        private let state = Lock(State())

        func set(_ continuation: CheckedContinuation<TransportResult, Never>) {
            let early = state.withLock { state -> TransportResult? in
                guard let early = state.early else {
                    state.continuation = continuation
                    return nil
                }
                state.early = nil
                return early
            }
            if let early { continuation.resume(returning: early) }
        }

        func resume(_ result: TransportResult) {
            let waiting = state.withLock { state -> CheckedContinuation<TransportResult, Never>? in
                guard !state.done else { return nil }
                state.done = true
                guard let continuation = state.continuation else {
                    state.early = result
                    return nil
                }
                state.continuation = nil
                return continuation
            }
            waiting?.resume(returning: result)
        }
    }

    private struct State {
        var pending: [Exchange] = []
        var takers: [(id: Int, continuation: CheckedContinuation<Exchange, any Error>)] = []
        var nextTakerID = 0
        var sent: [TransportRequest] = []
    }

    private let state = Lock(State())
    private let clock: any TrackerClock
    private let autoAnswer: @Sendable (TransportRequest) -> TransportResult?

    init(clock: any TrackerClock, autoAnswer: @escaping @Sendable (TransportRequest) -> TransportResult? = { _ in nil }) {
        self.clock = clock
        self.autoAnswer = autoAnswer
    }

    /// Every request sent so far, in order.
    var sent: [TransportRequest] { state.withLock { $0.sent } }

    func send(_ request: TransportRequest) async -> TransportResult {
        state.withLock { $0.sent.append(request) }
        if let result = autoAnswer(request) { return result }
        let reply = Reply()
        let exchange = Exchange(request: request, sentAt: clock.uptime(), reply: reply)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransportResult, Never>) in
                reply.set(continuation)
                let taker = state.withLock { state -> CheckedContinuation<Exchange, any Error>? in
                    if state.takers.isEmpty {
                        state.pending.append(exchange)
                        return nil
                    }
                    return state.takers.removeFirst().continuation
                }
                taker?.resume(returning: exchange)
            }
        } onCancel: {
            reply.resume(.failure("cancelled"))
        }
    }

    /// The next request, waiting for it at most `timeout` seconds of real time.
    func next(timeout: TimeInterval = 10) async throws -> Exchange {
        let id = state.withLock { state -> Int in
            defer { state.nextTakerID += 1 }
            return state.nextTakerID
        }
        let expiry = Task { [weak self] in
            try? await Task.sleep(for: .seconds(timeout))
            let taker = self?.state.withLock { state -> CheckedContinuation<Exchange, any Error>? in
                guard let index = state.takers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.takers.remove(at: index).continuation
            }
            taker?.resume(throwing: TestFailure("no request within \(timeout) s"))
        }
        defer { expiry.cancel() }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Exchange, any Error>) in
            let ready = state.withLock { state -> Exchange? in
                if !state.pending.isEmpty { return state.pending.removeFirst() }
                state.takers.append((id, continuation))
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Requests sent but not yet taken by `next()`.
    var waitingCount: Int { state.withLock { $0.pending.count } }
}
