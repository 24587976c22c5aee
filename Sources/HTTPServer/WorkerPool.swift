import Dispatch
import Foundation
import Runtime
import Synchronization

/// Threads that run handlers. Handlers may block in libpq; on Linux a Dispatch concurrent queue only
/// adds threads slowly when its workers block, so a blocked handler could delay others. A pool of
/// real threads (grown on demand up to a bound) makes "a blocking handler never stalls another
/// connection" hold as long as fewer than `maxThreads` handlers block at once.
final class WorkerPool: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var idle = 0
        var threads = 0
        var stopping = false
    }

    private let state = Mutex(State())
    private let wakeups = DispatchSemaphore(value: 0)
    private let maxThreads: Int

    init(maxThreads: Int) { self.maxThreads = max(1, maxThreads) }

    /// Runs `job` on a pool thread, starting a thread when none is idle and the bound allows.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let spawn = state.withLock { s -> Bool in
            s.jobs.append(job)
            if s.idle == 0, s.threads < maxThreads {
                s.threads += 1
                return true
            }
            return false
        }
        if spawn {
            Thread.start(name: "http-worker", stackSize: 1 << 20) { [self] in workLoop() }
        }
        wakeups.signal()
    }

    /// Lets threads finish the queued jobs and exit.
    func stop() {
        let threads = state.withLock { s -> Int in
            s.stopping = true
            return s.threads
        }
        for _ in 0..<threads { wakeups.signal() }
    }

    private func workLoop() {
        while true {
            state.withLock { $0.idle += 1 }
            wakeups.wait()
            let job = state.withLock { s -> (@Sendable () -> Void)?? in
                s.idle -= 1
                guard s.head < s.jobs.count else { return s.stopping ? .some(nil) : .none }
                let job = s.jobs[s.head]
                s.head += 1
                if s.head > 64, s.head * 2 > s.jobs.count {
                    s.jobs.removeFirst(s.head)
                    s.head = 0
                }
                return .some(job)
            }
            switch job {
            case .none: continue
            case .some(nil):
                state.withLock { $0.threads -= 1 }
                return
            case .some(let job?): job()
            }
        }
    }
}
