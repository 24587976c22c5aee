import AdTally
import AdTallyApp
import Foundation
import Testing

/// The configuration reference (`docs/CONFIGURATION.md`) and the README's short table say what the
/// settings table (`Configuration.settings`) says: every variable, its default and its range.
@Suite(.timeLimit(.minutes(3))) struct ConfigurationReferenceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The row of the reference for `setting`, as the table writes it.
    static func row(_ setting: Setting) -> String {
        "| `\(setting.name)` | \(setting.defaultValue) | \(setting.form) | \(setting.readBy.rawValue) | \(setting.help) |"
    }

    /// The rows of the markdown tables in `text` whose first cell is a variable in backquotes, by variable.
    static func rows(_ text: String) -> [String: String] {
        var rows: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let name = line.dropFirst(3).prefix { $0 != "`" }
            rows[String(name)] = String(line)
        }
        return rows
    }

    @Test func theReferenceListsEverySettingAsTheTableDeclaresIt() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        let documented = Self.rows(text)
        let expected = Configuration.settings.map(Self.row)
        let missing = Configuration.settings.filter { documented[$0.name] != Self.row($0) }
        #expect(missing.isEmpty, """
            docs/CONFIGURATION.md differs from Configuration.settings for \(missing.map(\.name)); its table should read:
            \(expected.joined(separator: "\n"))
            """)
        let unknown = Set(documented.keys).subtracting(Configuration.settings.map(\.name))
        #expect(unknown.isEmpty, "docs/CONFIGURATION.md documents variables AdTally does not read: \(unknown.sorted())")
    }

    @Test func theReadmesTableAgreesWithTheSettings() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let settings = Dictionary(uniqueKeysWithValues: Configuration.settings.map { ($0.name, $0) })
        let rows = Self.rows(text)
        #expect(!rows.isEmpty, "README.md has no configuration table")
        for (name, line) in rows {
            let setting = try #require(settings[name], "README.md lists \(name), which AdTally does not read")
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(cells.count >= 2 && cells[1] == setting.defaultValue, "README.md gives \(name) the default \(cells.dropFirst().first ?? "?"), the table \(setting.defaultValue)")
        }
    }

    @Test func everyDefaultIsAValueTheSettingAccepts() throws {
        for setting in Configuration.settings where !setting.defaultValue.hasPrefix("(") {
            let parsed = try Configuration.fromEnvironment(["DATABASE_URL": "postgresql://x@localhost/db", setting.name: setting.defaultValue])
            var defaults = Configuration()
            defaults.databaseURL = "postgresql://x@localhost/db"
            if setting.name == "DATABASE_URL" { defaults.databaseURL = setting.defaultValue }
            #expect(parsed == defaults, "\(setting.name)=\(setting.defaultValue) is not the default")
        }
    }
}
