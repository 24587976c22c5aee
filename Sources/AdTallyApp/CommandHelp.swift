import AdTally

/// `adtally --help`: the commands, then every setting of `Configuration.settings` with its help,
/// form and default. Generated from the declarations, its name column as wide as the longest
/// variable, so that no name is ever cut (`CommandHelpTests`).
public enum CommandHelp {
    /// The whole text, ending in a newline.
    public static var text: String {
        var text = """
        adtally: ad impression and click tracking that refuses to count what client bugs report twice.

        Usage:
          adtally [serve]     apply pending migrations, then serve HTTP (the default)
          adtally migrate     apply pending migrations and exit
          adtally maintain    run maintenance once (partitions, rollups, retention), print it as JSON lines, exit
          adtally healthcheck exit 0 when the server on 127.0.0.1:$\(Configuration.variable(of: \.port)) answers /healthz with 200
          adtally --version   the version (also adtally_build_info in /metrics)
          adtally --help      this text

        Environment:

        """
        let width = Configuration.settings.map(\.name.count).max() ?? 0
        for setting in Configuration.settings {
            text += "  \(pad(setting.name, width)) \(setting.help)\n"
            text += "  \(pad("", width)) \(setting.form); default \(setting.defaultValue)\n"
        }
        text += "\nEvery setting: docs/CONFIGURATION.md. The HTTP API: docs/API.md and docs/openapi.yaml.\n"
        return text
    }

    /// `text` followed by spaces up to `width` characters (never cut).
    private static func pad(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count))
    }
}
