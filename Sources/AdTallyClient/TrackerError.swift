/// Why a tracker could not start, or could not make its events durable. Unlike `TrackingError`,
/// these are about the tracker's environment (its settings, its directory, the disk).
public enum TrackerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A setting is out of its range; the message names it.
    case invalidConfiguration(String)
    /// The journal directory cannot be created, opened or written.
    case journalUnavailable(String)
    /// Another tracker (in this process or another) holds the journal directory: two writers on one
    /// journal would interleave records and resend each other's batches.
    case journalInUse(String)
    /// The tracker was shut down.
    case stopped

    /// A sentence for a log line.
    public var description: String {
        switch self {
        case let .invalidConfiguration(message): "invalid configuration: \(message)"
        case let .journalUnavailable(message): "journal unavailable: \(message)"
        case let .journalInUse(path): "journal directory \(path) is in use by another tracker"
        case .stopped: "the tracker was shut down"
        }
    }
}
