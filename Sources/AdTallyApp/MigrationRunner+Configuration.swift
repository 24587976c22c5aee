import AdTally

extension MigrationRunner {
    /// The migrations of the folder `configuration` names (`ADTALLY_MIGRATIONS_DIR`), or of the one
    /// `Migration.locateDirectory` finds without it, read once.
    public static func located(by configuration: Configuration) throws -> MigrationRunner {
        try located(directory: configuration.migrationsDirectory, variable: Configuration.variable(of: \.migrationsDirectory))
    }
}
