import Dispatch

extension DispatchSemaphore {
    /// Waits up to `timeout` for a signal without holding a thread of Swift's cooperative pool (an
    /// async test that blocked one could starve the tasks that would signal): the wait happens on
    /// a Dispatch thread. True when the signal came in time.
    public func signalled(within timeout: DispatchTimeInterval) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: self.wait(timeout: .now() + timeout) == .success)
            }
        }
    }
}
