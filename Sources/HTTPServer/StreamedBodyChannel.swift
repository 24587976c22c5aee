import Dispatch
import HTTP
import Synchronization
import Timestamps

/// Backpressure between a handler thread producing a streamed body and the IO queue sending it: the
/// producer accounts bytes before handing them over and blocks while more than `limit` are unsent;
/// the IO queue releases bytes as the kernel takes them, and fails the channel when the connection
/// closes so a blocked producer wakes up and throws.
final class StreamedBodyChannel: Sendable {
    private struct State {
        var unsent = 0
        var failed = false
        var waiting = false
    }

    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)
    let limit: Int

    init(limit: Int) { self.limit = max(1, limit) }

    /// Called by the producer; blocks while the buffer is over the limit (until `deadline` at the
    /// latest: then `HTTPBodyWriterDeadline`). Throws once failed.
    func acquire(_ count: Int, until deadline: ContinuousClock.Instant? = nil) throws {
        while true {
            let admitted = try state.withLock { s -> Bool in
                if s.failed { throw ClientGone() }
                if s.unsent < limit {
                    s.unsent += count
                    return true
                }
                s.waiting = true
                return false
            }
            if admitted { return }
            guard let deadline else {
                wakeup.wait()
                continue
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                state.withLock { $0.waiting = false }
                throw HTTPBodyWriterDeadline()
            }
            _ = wakeup.wait(timeout: .now() + min(left, .seconds(86_400)).dispatchInterval)
        }
    }

    /// Called on the IO queue when `count` bytes were written.
    func release(_ count: Int) {
        let wake = state.withLock { s -> Bool in
            s.unsent = max(0, s.unsent - count)
            if s.waiting, s.unsent < limit {
                s.waiting = false
                return true
            }
            return false
        }
        if wake { wakeup.signal() }
    }

    /// Called on the IO queue when the connection is gone.
    func fail() {
        let wake = state.withLock { s -> Bool in
            s.failed = true
            defer { s.waiting = false }
            return s.waiting
        }
        if wake { wakeup.signal() }
    }
}

/// Thrown by a streamed body's `write` once the client has gone away.
public struct ClientGone: Error, Sendable {}
