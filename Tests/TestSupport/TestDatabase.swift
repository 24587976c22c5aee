import Foundation
import Postgres

/// A database of its own for one test, created on the server that `DATABASE_URL` names (the
/// throwaway cluster `scripts/test` starts). Tests that need PostgreSQL call `TestDatabase.create()`
/// and fail, never skip, when it cannot connect.
public struct TestDatabase: Sendable {
    /// Connection string of the new, empty database.
    public let connectionString: String
    /// Its name.
    public let name: String

    /// The server's connection string from `DATABASE_URL`; throws a clear error when it is unset.
    public static func serverConnectionString() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty else {
            throw TestDatabaseError("DATABASE_URL is not set: run the tests through scripts/test, which starts PostgreSQL")
        }
        return url
    }

    /// Creates an empty database with a unique name.
    public static func create(prefix: String = "t") throws -> TestDatabase {
        let server = try serverConnectionString()
        let name = "adtally_\(prefix)_\(UUID().uuidString.prefix(12).lowercased().replacingOccurrences(of: "-", with: ""))"
        let admin = try PostgresConnection(connectionString: server)
        defer { admin.close() }
        // CREATE DATABASE takes no parameters; the name is generated above from hex digits only.
        try admin.execute("CREATE DATABASE \(name)")
        return TestDatabase(connectionString: withDatabase(server, name), name: name)
    }

    /// Opens a connection to this database.
    public func connect() throws -> PostgresConnection {
        try PostgresConnection(connectionString: connectionString)
    }

    /// Replaces the database name of a URI or key/value connection string.
    public static func withDatabase(_ connectionString: String, _ database: String) -> String {
        if connectionString.hasPrefix("postgres://") || connectionString.hasPrefix("postgresql://"),
           var components = URLComponents(string: connectionString) {
            components.path = "/" + database
            if let url = components.string { return url }
        }
        // In key/value form a later keyword overrides an earlier one.
        return connectionString + " dbname=\(database)"
    }
}

/// A test set-up failure with a message that says what to do.
public struct TestDatabaseError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
