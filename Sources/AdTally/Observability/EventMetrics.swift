/// Where event outcomes are counted for `/metrics` (`adtally_events_total{type,outcome,reason}`).
protocol EventMetrics: Sendable {
    func record(_ answered: [(type: EventType?, outcome: EventOutcome)])
}
