import AdTally
@testable import AdTallyApp
import Testing

/// `adtally --help` lists every declared setting by its whole name, with its help, form and default,
/// and nothing else in the name column (a name cut to a column would show as a variable that does
/// not exist: `ADTALLY_MAINTENANCE_STATEMENT_TIMEOUT_` once did).
@Suite(.timeLimit(.minutes(3))) struct CommandHelpTests {
    /// The environment section's lines of `text`, in pairs: a variable's first word and the rest.
    static func entries(_ text: String) -> [(name: String, line: String, next: String)] {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: "Environment:") else { return [] }
        var entries: [(String, String, String)] = []
        var index = start + 1
        while index < lines.count {
            let line = lines[index]
            if line.hasPrefix("  "), let first = line.dropFirst(2).first, first != " " {
                let name = String(line.dropFirst(2).prefix { $0 != " " })
                entries.append((name, line, index + 1 < lines.count ? lines[index + 1] : ""))
            }
            index += 1
        }
        return entries
    }

    @Test func everySettingIsListedByItsWholeNameWithItsHelpFormAndDefault() {
        let entries = Self.entries(CommandHelp.text)
        #expect(entries.map(\.name) == Configuration.settings.map(\.name))
        for (setting, entry) in zip(Configuration.settings, entries) {
            #expect(entry.line.hasSuffix(" " + setting.help), "--help's line for \(setting.name): \(entry.line)")
            #expect(entry.next.hasSuffix(" \(setting.form); default \(setting.defaultValue)"), "--help's second line for \(setting.name): \(entry.next)")
        }
    }

    @Test func theLongestNameIsWhole() throws {
        let longest = try #require(Configuration.settings.map(\.name).max { $0.count < $1.count })
        #expect(longest == "ADTALLY_MAINTENANCE_STATEMENT_TIMEOUT_SECONDS")
        #expect(CommandHelp.text.contains("  \(longest) "))
    }

    @Test func theHealthcheckReadsItsPortAsDeclared() {
        #expect(Configuration.value(of: \.port, in: [:]) == Configuration().port)
        #expect(Configuration.value(of: \.port, in: ["PORT": " 9090 "]) == 9090)
        #expect(Configuration.value(of: \.port, in: ["PORT": "abc"]) == Configuration().port)
    }

    @Test func everyVariableNamedInCodeIsADeclaredSetting() {
        for keyPath in Configuration.tokenLists {
            #expect(Configuration.settings.map(\.name).contains(Configuration.variable(of: keyPath)))
        }
        #expect(Configuration.variable(of: \.botAgentsFile) == "ADTALLY_BOT_AGENTS_FILE")
        #expect(Configuration.variable(of: \.blockedAddressesFile) == "ADTALLY_BLOCKED_ADDRESSES_FILE")
        #expect(Configuration.variable(of: \.databaseURL) == "DATABASE_URL")
        #expect(Configuration.variable(of: \.reportsDatabaseURL) == "ADTALLY_REPORTS_DATABASE_URL")
    }
}
