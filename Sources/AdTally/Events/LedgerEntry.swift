import Contract

/// What the `event_ids` ledger holds for a taken event id: the identity a replay must match and the
/// outcome it was answered with. A plain value, so that rule 2 (`IdempotencyRule`) judges it
/// without the database; `EventIDLedger` reads it from its row.
struct LedgerEntry: Equatable, Sendable {
    let eventID: String
    let sessionID: String
    let type: String
    let adID: String
    let outcome: EventOutcome
}
