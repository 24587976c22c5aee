import Foundation

/// One forward-only schema change, read from `migrations/NNNN_name.sql`.
public struct Migration: Sendable, Equatable {
    /// The number before the underscore; migrations apply in this order.
    public let version: Int
    /// The part after the underscore, without `.sql`.
    public let name: String
    /// The file name, for error messages that tell an operator which file to look at.
    public let fileName: String
    /// The SQL, run as one transaction, one statement at a time (`SQLStatements`).
    public let sql: String
    /// Checksums of earlier texts of this file that a database may have recorded, from its lines
    /// `-- adtally: earlier checksum <sha256 hex>`. A migration corrected after a release (to run on
    /// Citus, say) lists the text it replaced, when both make the same schema: a database that
    /// applied the earlier text is accepted, and its record takes the new checksum.
    public let earlierChecksums: [String]

    public init(version: Int, name: String, fileName: String, sql: String) {
        self.version = version
        self.name = name
        self.fileName = fileName
        self.sql = sql
        self.earlierChecksums = Self.earlierChecksums(in: sql)
    }

    static let earlierChecksumPrefix = "-- adtally: earlier checksum "

    private static func earlierChecksums(in sql: String) -> [String] {
        sql.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix(earlierChecksumPrefix) else { return nil }
            let checksum = line.dropFirst(earlierChecksumPrefix.count).trimmingCharacters(in: .whitespaces).lowercased()
            return checksum.count == 64 && checksum.allSatisfy(\.isHexDigit) ? checksum : nil
        }
    }

    /// Reads every `*.sql` file of a folder, in version order. A `.sql` file whose name is not
    /// `NNNN_name.sql`, or two files with one version, stop the start: silently skipping a file
    /// would leave the schema short of what the code expects.
    public static func load(from directory: URL) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError.directoryUnreadable(directory.path, "\(error)")
        }
        var migrations: [Migration] = []
        for fileName in names.sorted() where fileName.hasSuffix(".sql") {
            let stem = fileName.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"),
                  let version = Int(stem[stem.startIndex..<underscore]),
                  stem[stem.startIndex..<underscore].allSatisfy(\.isASCII),
                  version > 0,
                  stem.index(after: underscore) < stem.endIndex
            else {
                throw MigrationError.badFileName(fileName)
            }
            let url = directory.appendingPathComponent(fileName)
            guard let data = FileManager.default.contents(atPath: url.path),
                  let sql = String(data: data, encoding: .utf8) else {
                throw MigrationError.directoryUnreadable(url.path, "not readable as UTF-8")
            }
            if let other = migrations.first(where: { $0.version == version }) {
                throw MigrationError.duplicateVersion(version, other.fileName, fileName)
            }
            migrations.append(Migration(version: version, name: String(stem[stem.index(after: underscore)...]), fileName: fileName, sql: sql))
        }
        return migrations.sorted { $0.version < $1.version }
    }

    /// Where the migrations are when `ADTALLY_MIGRATIONS_DIR` does not say: `migrations/` beside
    /// the executable or in `../share/adtally/`, else `./migrations`, else the source tree this was
    /// built from.
    public static func locateDirectory() -> URL? {
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath().deletingLastPathComponent()
        let sourceRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [
            executable.appendingPathComponent("migrations"),
            executable.appendingPathComponent("../share/adtally/migrations").standardized,
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("migrations"),
            sourceRoot.appendingPathComponent("migrations"),
        ]
        var isDirectory: ObjCBool = false
        return candidates.first { FileManager.default.fileExists(atPath: $0.path, isDirectory: &isDirectory) && isDirectory.boolValue }
    }
}

/// Why migrations could not be applied; each names the file an operator has to look at.
public enum MigrationError: Error, CustomStringConvertible, Equatable {
    case directoryUnreadable(String, String)
    case badFileName(String)
    case duplicateVersion(Int, String, String)
    case checksumMismatch(fileName: String, applied: String, current: String)
    case failed(fileName: String, message: String)
    /// Migrations are pending and the database URL names a Citus worker, through which none can be applied.
    case pendingOnCitusWorker([Int])

    public var description: String {
        switch self {
        case .directoryUnreadable(let path, let why):
            return "cannot read migrations at \(path): \(why)"
        case .badFileName(let name):
            return "migration file \(name) is not named NNNN_name.sql"
        case .duplicateVersion(let version, let first, let second):
            return "migrations \(first) and \(second) share version \(version)"
        case .checksumMismatch(let fileName, let applied, let current):
            return "migration \(fileName) was changed after it was applied (checksum \(applied.prefix(12)) applied, \(current.prefix(12)) now); add a new migration instead"
        case .failed(let fileName, let message):
            return "migration \(fileName) failed: \(message)"
        case .pendingOnCitusWorker(let versions):
            return "migrations \(versions.map(String.init).joined(separator: ",")) are pending and this database URL names a Citus worker: "
                + "run adtally migrate through the coordinator first (docs/SCALING.md)"
        }
    }
}
