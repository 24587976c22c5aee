/// A batch cut from the head of the queue. It is sent whole, again and again until the server
/// answers, never split or merged (except into halves when the server answers `413`), so that the
/// server sees each tap's clicks together and a retry is the same request.
struct QueuedBatch: Sendable, Equatable {
    enum Phase: Sendable, Equatable {
        /// Its record (and any of its events not yet written) is on its way to the journal.
        case journaling
        /// Ready to send.
        case ready
        /// The one request in flight.
        case inFlight
        /// Answered `200`; its answer is being read. Not sent again unless the answer does not fit it.
        case answered
    }

    let id: UInt64
    let sequences: [UInt64]
    /// The clock correction for its events that were tracked before any was known.
    let correction: Int64?
    var phase: Phase
}
