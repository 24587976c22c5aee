import Contract

/// One entry of an events request after rule 1: either a well-formed event for the later rules, or
/// everything needed to answer `rejected`/`invalid_event` and count it in metrics.
public enum EventCandidate: Sendable, Hashable {
    case valid(EventInput)
    /// - echoID: the result's `event_id`: the lowercase UUID when the event had a valid one, else the
    ///   string as sent, else `nil` (absent, `null`, or not a string).
    /// - field: the first bad member (for half a visibility pair, the missing one); `nil` only for a
    ///   batch entry that is not a JSON object.
    /// - message: for a human, what is wrong with that member (`occurred_at is older than 7 days`),
    ///   since the field alone does not say which of its rules it broke.
    /// - typeForMetrics: the event's `type` when that member was valid, for
    ///   `adtally_events_total{type=…}`; `nil` means `"unknown"`.
    case invalid(echoID: String?, field: String?, message: String, typeForMetrics: EventType?)

    /// The `event_id` to echo in this entry's result.
    public var echoID: String? {
        switch self {
        case .valid(let event): return event.eventID
        case .invalid(let echoID, _, _, _): return echoID
        }
    }

    /// The `type` label for metrics; `nil` means `"unknown"`.
    public var typeForMetrics: EventType? {
        switch self {
        case .valid(let event): return event.type
        case .invalid(_, _, _, let type): return type
        }
    }
}
