
/// Wakes one waiting loop: a signal sent while nobody waits is kept for the next wait, so none is
/// lost between a loop's look at the state and its wait. Each of the tracker's two loops owns one.
final class Wakeup: Sendable {
    private struct State {
        var signaled = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Lock(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.signaled = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next signal, or at `deadline` on `clock` (nil: no deadline).
    func wait(until deadline: Duration?, clock: any TrackerClock) async {
        let timer = deadline.map { deadline in
            Task { [weak self] in
                do {
                    try await clock.sleep(until: deadline)
                    self?.signal()
                } catch {
                    // Cancelled: the wait ended by a signal.
                }
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.signaled {
                    state.signaled = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        timer?.cancel()
    }
}
