import Foundation

/// What the tracker tells its observer, as it happens, on the tracker's own queue (never the caller's
/// thread; hop to the main actor to touch UI). Nothing here needs an answer: the tracker goes on.
public enum TrackerReport: Sendable, Equatable {
    /// The server answered a batch: one outcome per event, in the order they were tracked.
    case answered([EventOutcome])
    /// Events that will never reach the server, and why.
    case dropped([DroppedEvent], because: DropReason)
    /// An attempt failed in a way worth retrying; the next comes after `after`.
    case retrying(after: Duration, failures: Int, reason: String)
    /// The journal could not be read or written; the message says why. Events stay in memory and
    /// the write is tried again, but until then they would not survive the app's death.
    case journalFailed(String)
    /// At start, the journal gave back events from an earlier run (`batches` of them already cut),
    /// and `lostBytes` bytes of it were torn or damaged.
    case restored(events: Int, batches: Int, lostBytes: Int)
}

/// An event that left the queue undelivered: enough of it to count the loss, per type and ad.
public struct DroppedEvent: Sendable, Hashable {
    /// The id `impression` or `click` returned for it.
    public let eventID: UUID
    /// Its type.
    public let type: EventType
    /// Its session.
    public let sessionID: String
    /// Its ad.
    public let adID: String

    /// A dropped event of the given parts.
    public init(eventID: UUID, type: EventType, sessionID: String, adID: String) {
        self.eventID = eventID
        self.type = type
        self.sessionID = sessionID
        self.adID = adID
    }
}

/// Why events were dropped.
public enum DropReason: Sendable, Hashable, CustomStringConvertible {
    /// The queue held `capacity` events and more came: the oldest go first.
    case queueFull
    /// The server refused the whole batch with a `4xx` other than `408`, `429` and `413` (or `413`
    /// for a single event): a client bug or a wrong endpoint, which retrying cannot fix.
    case refused(status: Int, code: String?, message: String?)

    /// A short phrase for logs.
    public var description: String {
        switch self {
        case .queueFull: "queue full"
        case let .refused(status, code, message):
            "refused with \(status)\(code.map { code in " \(code)" } ?? "")\(message.map { message in ": \(message)" } ?? "")"
        }
    }
}
