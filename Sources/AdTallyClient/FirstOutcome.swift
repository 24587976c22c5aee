
/// A value settled once, by whoever comes first (a result, a shutdown, a deadline); later
/// `settle` calls are ignored. `value` suspends the calling task until it is settled.
final class FirstOutcome<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [CheckedContinuation<Value, Never>] = []
    }

    private let state = Lock(State())

    /// Settles the outcome unless it was settled already; true when this call settled it.
    @discardableResult
    func settle(_ value: Value) -> Bool {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, Never>]? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(returning: value) }
        return true
    }

    /// The outcome, once settled.
    var value: Value {
        get async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
                let settled = state.withLock { state -> Value? in
                    if state.value == nil { state.waiters.append(continuation) }
                    return state.value
                }
                if let settled { continuation.resume(returning: settled) }
            }
        }
    }
}
