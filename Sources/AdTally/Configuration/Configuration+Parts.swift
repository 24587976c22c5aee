/// The parts of the service built from the settings: each reads its values (and, for an error
/// line, its variables' names) from `Configuration`, so that no part retypes a variable's name or
/// copies a default.
extension TrafficFilters {
    /// Reads the files `configuration` names; throws a `ConfigurationError` naming the variable,
    /// the file and its first bad line.
    public convenience init(configuration: Configuration) throws(ConfigurationError) {
        do throws(BadFile) {
            try self.init(agentsFile: configuration.botAgentsFile.map { ListFile(path: $0, variable: Configuration.variable(of: \.botAgentsFile)) },
                          addressesFile: configuration.blockedAddressesFile.map {
                              ListFile(path: $0, variable: Configuration.variable(of: \.blockedAddressesFile))
                          })
        } catch {
            throw ConfigurationError(variable: error.file.variable, message: error.message)
        }
    }
}

extension Maintenance.Settings {
    /// The settings `configuration` gives (its retention and session TTL, in whole days).
    public init(_ configuration: Configuration) {
        self.init(eventsRetentionDays: configuration.eventsRetention.wholeSeconds / 86_400,
                  sessionTTLDays: configuration.sessionTTL.wholeSeconds / 86_400,
                  statementTimeoutSeconds: configuration.maintenanceStatementTimeout.wholeSeconds)
    }
}
