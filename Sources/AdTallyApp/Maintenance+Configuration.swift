import AdTally
import Postgres
import Timestamps

/// Maintenance's settings built from the configuration, whose defaults are the only ones.
extension Maintenance.Settings {
    /// The settings `configuration` gives (its retention and session TTL, in whole days).
    public init(_ configuration: Configuration) {
        self.init(eventsRetentionDays: configuration.eventsRetention.wholeSeconds / 86_400,
                  sessionTTLDays: configuration.sessionTTL.wholeSeconds / 86_400,
                  limit: StatementLimit(configuration.maintenanceStatementTimeout))
    }
}
