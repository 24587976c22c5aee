import Contract

/// The traffic filters of API 1.3 (general invalid traffic, in the MRC's words): the first check of
/// rules 3 and 4, after rules 1 and 2, so that a replay keeps its first answer. A request whose
/// `User-Agent` matches the bot-agent list, or that comes from a blocked address, has every fresh
/// event `rejected` with `bot_agent` or `blocked_address` (the agent is checked first), stored like
/// any other so that the filtered traffic is reported per ad. The lists and their matching are
/// `TrafficFilters`; the route gives its verdict to each event (`EventInput.trafficFilter`).
enum TrafficFilterRule {
    /// The outcome of a fresh event whose request the filters refused, nil for one they let through.
    static func judge(_ event: EventInput) -> EventOutcome? {
        event.trafficFilter.map { .rejected($0.reason) }
    }
}
