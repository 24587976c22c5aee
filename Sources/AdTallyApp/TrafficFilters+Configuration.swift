import AdTally

/// The traffic filters built from the settings: the files come with the names of the variables that
/// named them, from their declarations, so that no part retypes a variable's name.
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
