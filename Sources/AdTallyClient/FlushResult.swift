/// How a `flush()` ended.
public enum FlushResult: Sendable, Equatable {
    /// Every event tracked before the call has left the queue: answered by the server (whatever
    /// the verdict), or dropped and reported.
    case delivered
    /// An attempt failed in a way worth retrying (no network, the server busy or down). The events
    /// are safe in the journal and the tracker keeps trying on its own, first after `after`.
    case willRetry(after: Duration, reason: String)
    /// The calling task was cancelled first; nothing was given up.
    case cancelled
    /// The tracker was shut down first.
    case stopped
}
