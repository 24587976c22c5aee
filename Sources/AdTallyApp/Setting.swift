import AdTally
import HTTPServer
import Runtime
import Timestamps

/// One environment variable of `Configuration`, declared once: where its value goes, the values it
/// takes, its default, its help, and the part of the service that reads it. Built with the
/// functions below, one per kind of value, so that a new setting is one entry in
/// `Configuration.settings`.
public struct Setting: Sendable {
    /// The part of the service that reads a setting (the reference groups them by it).
    public enum Part: String, Sendable, CaseIterable {
        case database
        case http = "HTTP server"
        case rules = "event rules"
        case reports
        case maintenance
        case security
        case traffic = "limits and traffic filters"
        case logging
        case migrations
    }

    /// The environment variable.
    public let name: String
    /// The property of `Configuration` it sets: how code names a setting's variable without
    /// typing it again (`Configuration.variable(of:)`).
    let keyPath: PartialKeyPath<Configuration> & Sendable
    /// The values it takes, in words: "integer, 0 to 65535", "seconds, 0 to 86400", "on or off".
    public let form: String
    /// Its default as one would write it in the environment (`30`, `on`), or `(required)`, `(unset)`.
    public let defaultValue: String
    /// What it does, for `--help` and the reference.
    public let help: String
    /// Which part of the service reads it.
    public let readBy: Part
    let required: Bool
    /// Surrounding spaces are not part of the value (false for a token, whose spaces are refused).
    let trimsSpaces: Bool
    let apply: @Sendable (String, inout Configuration) throws(ConfigurationError) -> Void

    var missingMessage: String {
        "is not set; give a PostgreSQL URI such as postgresql://user@localhost:5432/adtally"
    }

    /// The default of `keyPath`, as `render` writes it.
    private static func defaultText<Value>(_ keyPath: KeyPath<Configuration, Value> & Sendable, _ render: (Value) -> String) -> String {
        render(Configuration()[keyPath: keyPath])
    }

    // MARK: Kinds of value

    /// What a text value must look like.
    public enum TextForm: Sendable {
        /// Anything.
        case any
        /// An IP address or host name: visible ASCII, no spaces.
        case hostName
        /// A bearer token: visible ASCII without spaces (it travels in an HTTP header).
        case token
    }

    private static func check(_ value: String, _ form: TextForm, _ name: String) throws(ConfigurationError) {
        switch form {
        case .any:
            return
        case .hostName:
            guard value.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw ConfigurationError(variable: name, message: "must be an IP address or host name, got \(value.quotedExcerpt)")
            }
        case .token:
            guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw ConfigurationError(variable: name, message: "must be visible ASCII without spaces (it travels in an HTTP header)")
            }
        }
    }

    private static func formText(_ form: TextForm) -> String {
        switch form {
        case .any: "text"
        case .hostName: "IP address or host name"
        case .token: "visible ASCII, no spaces"
        }
    }

    /// A text value; `required` ones stop the start when missing.
    static func text(_ name: String, _ keyPath: WritableKeyPath<Configuration, String> & Sendable, form: TextForm = .any,
                     required: Bool = false, readBy: Part, help: String) -> Setting {
        Setting(name: name, keyPath: keyPath, form: formText(form), defaultValue: required ? "(required)" : defaultText(keyPath) { $0 }, help: help,
                readBy: readBy, required: required, trimsSpaces: true) { value, configuration throws(ConfigurationError) in
            try check(value, form, name)
            configuration[keyPath: keyPath] = value
        }
    }

    /// A text value that may be unset.
    static func optionalText(_ name: String, _ keyPath: WritableKeyPath<Configuration, String?> & Sendable, form: TextForm = .any,
                             readBy: Part, help: String) -> Setting {
        Setting(name: name, keyPath: keyPath, form: formText(form), defaultValue: "(unset)", help: help, readBy: readBy, required: false,
                trimsSpaces: form != .token) { value, configuration throws(ConfigurationError) in
            try check(value, form, name)
            configuration[keyPath: keyPath] = value
        }
    }

    /// A whole number within `range`.
    static func integer(_ name: String, _ keyPath: WritableKeyPath<Configuration, Int> & Sendable, _ range: ClosedRange<Int>,
                        readBy: Part, help: String) -> Setting {
        Setting(name: name, keyPath: keyPath, form: "integer, \(range.lowerBound) to \(range.upperBound)", defaultValue: defaultText(keyPath) { String($0) },
                help: help, readBy: readBy, required: false, trimsSpaces: true) { value, configuration throws(ConfigurationError) in
            configuration[keyPath: keyPath] = try whole(value, range, name)
        }
    }

    private static func whole(_ value: String, _ range: ClosedRange<Int>, _ name: String) throws(ConfigurationError) -> Int {
        guard value.allSatisfy(\.isASCII), let number = Int(value), range.contains(number) else {
            throw ConfigurationError(variable: name, message: "must be an integer from \(range.lowerBound) to \(range.upperBound), got \(value.quotedExcerpt)")
        }
        return number
    }

    /// The unit a duration is written in.
    public enum DurationUnit: String, Sendable {
        case milliseconds, seconds, days

        func duration(_ count: Int) -> Duration {
            switch self {
            case .milliseconds: .milliseconds(count)
            case .seconds: .seconds(count)
            case .days: .days(count)
            }
        }

        func count(_ duration: Duration) -> Int {
            switch self {
            case .milliseconds: duration.wholeMilliseconds
            case .seconds: duration.wholeSeconds
            case .days: duration.wholeSeconds / 86_400
            }
        }
    }

    /// A duration, written as a whole number of `unit`s within `range`.
    static func duration(_ name: String, _ keyPath: WritableKeyPath<Configuration, Duration> & Sendable, unit: DurationUnit,
                         _ range: ClosedRange<Int>, readBy: Part, help: String) -> Setting {
        Setting(name: name, keyPath: keyPath, form: "\(unit.rawValue), \(range.lowerBound) to \(range.upperBound)",
                defaultValue: defaultText(keyPath) { String(unit.count($0)) }, help: help, readBy: readBy, required: false,
                trimsSpaces: true) { value, configuration throws(ConfigurationError) in
            configuration[keyPath: keyPath] = unit.duration(try whole(value, range, name))
        }
    }

    /// A switch: `on` or `off` (any case; `true`/`false` and `1`/`0` too).
    static func toggle(_ name: String, _ keyPath: WritableKeyPath<Configuration, Bool> & Sendable, readBy: Part, help: String) -> Setting {
        Setting(name: name, keyPath: keyPath, form: "on or off", defaultValue: defaultText(keyPath) { $0 ? "on" : "off" }, help: help, readBy: readBy,
                required: false, trimsSpaces: true) { value, configuration throws(ConfigurationError) in
            switch value.lowercased() {
            case "on", "true", "1": configuration[keyPath: keyPath] = true
            case "off", "false", "0": configuration[keyPath: keyPath] = false
            default: throw ConfigurationError(variable: name, message: "must be on or off, got \(value.quotedExcerpt)")
            }
        }
    }

    /// The shortest bearer token accepted: a short token can be guessed (`dev-admin-token`, 15
    /// characters, is the shortest a script of this repository uses).
    public static let minimumTokenLength = 12

    /// A comma-separated list of bearer tokens: entries trimmed, empty ones ignored, each visible
    /// ASCII without spaces and at least `minimumTokenLength` long. The error never shows a token.
    static func tokens(_ name: String, _ keyPath: WritableKeyPath<Configuration, [String]> & Sendable, readBy: Part,
                       help: String) -> Setting {
        Setting(name: name, keyPath: keyPath, form: "tokens, comma-separated, each at least \(minimumTokenLength) visible ASCII characters", defaultValue: "(unset)",
                help: help, readBy: readBy, required: false, trimsSpaces: true) { value, configuration throws(ConfigurationError) in
            var tokens: [String] = []
            for entry in value.split(separator: ",", omittingEmptySubsequences: true) {
                let token = entry.trimmingCharacters(in: .whitespaces)
                guard !token.isEmpty else { continue }
                guard token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    throw ConfigurationError(variable: name, message: "must hold tokens of visible ASCII without spaces, separated by commas (a token travels in an HTTP header)")
                }
                guard token.utf8.count >= minimumTokenLength else {
                    throw ConfigurationError(variable: name, message: "holds a token shorter than \(minimumTokenLength) characters; make a long random one (openssl rand -hex 24)")
                }
                if !tokens.contains(token) { tokens.append(token) }
            }
            configuration[keyPath: keyPath] = tokens
        }
    }

    /// A comma-separated list of addresses and CIDR ranges, IPv4 and IPv6.
    static func addresses(_ name: String, _ keyPath: WritableKeyPath<Configuration, AddressRanges> & Sendable, readBy: Part,
                          help: String) -> Setting {
        Setting(name: name, keyPath: keyPath, form: "addresses and CIDR ranges, comma-separated", defaultValue: "(empty)", help: help, readBy: readBy,
                required: false, trimsSpaces: true) { value, configuration throws(ConfigurationError) in
            do throws(AddressRanges.BadEntry) {
                configuration[keyPath: keyPath] = try AddressRanges.parse(list: value)
            } catch {
                throw ConfigurationError(variable: name, message: "holds \(error.text.quotedExcerpt), which is not an IPv4 or IPv6 address or CIDR range")
            }
        }
    }

    /// One of a type's cases, by its raw value (any case).
    static func choice<Value: RawRepresentable & CaseIterable & Sendable>(
        _ name: String, _ keyPath: WritableKeyPath<Configuration, Value> & Sendable, readBy: Part, help: String
    ) -> Setting where Value.RawValue == String {
        let names = Value.allCases.map(\.rawValue)
        return Setting(name: name, keyPath: keyPath, form: names.joined(separator: ", "), defaultValue: defaultText(keyPath) { $0.rawValue }, help: help,
                       readBy: readBy, required: false, trimsSpaces: true) { value, configuration throws(ConfigurationError) in
            guard let parsed = Value(rawValue: value.lowercased()) else {
                throw ConfigurationError(variable: name, message: "must be one of \(names.joined(separator: ", ")), got \(value.quotedExcerpt)")
            }
            configuration[keyPath: keyPath] = parsed
        }
    }
}
