import Contract

/// Rule 2 of the events contract (idempotency): an event whose id is taken is a replay, answered
/// with its original outcome whatever its other fields say, when it has the stored event's type,
/// session and ad; otherwise it is a conflict. Either way nothing new is stored. The store reads
/// the ledger entry (`EventIDLedger`) and applies this verdict; no SQL repeats it.
enum IdempotencyRule {
    /// The answer to `event`, whose id the ledger holds as `entry`.
    static func answer(_ event: EventInput, _ entry: LedgerEntry) -> EventOutcome {
        guard entry.type == event.type.rawValue, entry.sessionID == event.sessionID, entry.adID == event.adID else {
            return .rejected(.eventIDConflict)
        }
        return entry.outcome
    }
}
