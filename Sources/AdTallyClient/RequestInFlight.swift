
/// The sender's one request in flight, raced against shutdown. The transport's `send` runs in a
/// task of its own, and the sender waits for whichever comes first: its result, or `abandon()`
/// from `shutdown()`, which cancels the request and hands the sender `nil` at once. So a shutdown
/// never waits for a transport to honour the cancellation (an app's transport may not, and one that
/// lost it would otherwise hold the tracker's shutdown forever); a result that comes later is dropped.
final class RequestInFlight: Sendable {
    private let outcome = FirstOutcome<TransportResult?>()
    private let attempt = Lock<(task: Task<Void, Never>?, abandoned: Bool)>((nil, false))

    /// Sends `request` through `transport` in a task of its own: on `thread` when one is given (a
    /// transport that blocks there, `PlainHTTPTransport`), else on the global concurrent executor,
    /// so that no other transport can hold the sender's thread.
    func start(_ request: TransportRequest, through transport: any EventTransport, on thread: SenderThread?) {
        guard !attempt.withLock({ $0.abandoned }) else { return }
        let task: Task<Void, Never>
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
            let executor: any TaskExecutor
            if let thread { executor = thread } else { executor = globalConcurrentExecutor }
            // The task keeps its executor alive: an abandoned request may outlive the tracker.
            task = Task(executorPreference: executor) { [outcome] () -> Void in
                let result = await transport.send(request)
                withExtendedLifetime(executor) { _ = outcome.settle(result) }
            }
        } else {
            // No task executors before iOS 18 / macOS 15, and so no sender thread (`thread` is nil):
            // an unstructured task made here, outside any actor, runs on the global executor.
            task = Task { [outcome] () -> Void in
                outcome.settle(await transport.send(request))
            }
        }
        let abandoned = attempt.withLock { attempt -> Bool in
            if !attempt.abandoned { attempt.task = task }
            return attempt.abandoned
        }
        // Abandoned between the look above and now: the request is cancelled as soon as it starts.
        if abandoned { task.cancel() }
    }

    /// The transport's result, or nil when the tracker was shut down first.
    func result() async -> TransportResult? { await outcome.value }

    /// Shutdown: cancels the request and ends the sender's wait with nil, whatever the transport does.
    func abandon() {
        let task = attempt.withLock { attempt -> Task<Void, Never>? in
            attempt.abandoned = true
            defer { attempt.task = nil }
            return attempt.task
        }
        task?.cancel()
        outcome.settle(nil)
    }
}
