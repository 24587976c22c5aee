import Foundation

/// Reads Swift source for uses of APIs newer than the client's platform floor (iOS 16 / macOS 13 /
/// tvOS 16 / watchOS 9 / visionOS 1). The client is built and tested on Linux, where the compiler
/// checks no Apple availability at all: `Mutex` compiles here and breaks an iOS 16 app's build. So
/// this scanner stands in for the check, as far as reading text can:
///
/// - It knows the APIs in `newerAPIs`, not every API: the list is what the library has used or is
///   likely to reach for (locks, atomics, executors, observation, task groups, new integer and
///   collection types), each with the versions the toolchain's own interfaces give it
///   (`/opt/swift/usr/lib/swift/linux/*.swiftmodule/*.swiftinterface` carry Apple availability even
///   on Linux); Foundation has no interface there, so its entries come from Apple's documentation.
///   APIs at or below the floor are left out on purpose, among them `URLSession.bytes(for:)`
///   (iOS 15), `Duration`, `Clock`, `Regex` and `OSAllocatedUnfairLock` (iOS 16), and what the
///   stdlib back-deploys (`withTaskCancellationHandler(operation:onCancel:isolation:)`,
///   `AsyncStream.makeStream`, `Actor.assumeIsolated`).
/// - Comments and string literals are blanked before matching, so prose about `Mutex` is fine.
/// - A use is allowed inside a block guarded for at least that API's version on every Apple
///   platform: a declaration marked `@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0,
///   visionOS 2.0, *)` (from the attribute to the end of the declaration's braces), or the body of
///   `if #available(...)`. `guard #available` is not understood (its uses are reported), nor are
///   guards that leave a platform out (on that platform, `*` means the floor itself).
/// - What text cannot show is not checked: an API reached through a type alias or a protocol, and
///   the runtime features that the compiler gates by version (typed-throws function types as
///   metadata, `@isolated(any)` metadata). The scan is a tripwire, not a proof.
struct FloorScanner {
    /// An API newer than the floor, with the first version of each platform that has it.
    struct API: Sendable {
        let name: String
        /// Matched against code with comments and strings blanked.
        let pattern: String
        let macOS: Int
        let iOS: Int
        let tvOS: Int
        let watchOS: Int
        let visionOS: Int

        /// Introduced with iOS 18 / macOS 15 / tvOS 18 / watchOS 11 / visionOS 2 (Swift 6.0's runtime).
        static func swift6(_ name: String, _ pattern: String) -> API {
            API(name: name, pattern: pattern, macOS: 15, iOS: 18, tvOS: 18, watchOS: 11, visionOS: 2)
        }

        /// Introduced with iOS 17 / macOS 14 / tvOS 17 / watchOS 10 (Swift 5.9's runtime; visionOS 1).
        static func swift59(_ name: String, _ pattern: String) -> API {
            API(name: name, pattern: pattern, macOS: 14, iOS: 17, tvOS: 17, watchOS: 10, visionOS: 1)
        }

        /// Introduced with the 26 releases of every Apple platform (Swift 6.2's runtime).
        static func swift62(_ name: String, _ pattern: String) -> API {
            API(name: name, pattern: pattern, macOS: 26, iOS: 26, tvOS: 26, watchOS: 26, visionOS: 26)
        }
    }

    /// One use of a newer API outside a guard that covers it.
    struct Finding: Sendable, CustomStringConvertible {
        let file: String
        let line: Int
        let api: String
        let iOS: Int
        let macOS: Int

        var description: String { "\(file):\(line): \(api) needs iOS \(iOS) / macOS \(macOS)" }
    }

    static let newerAPIs: [API] = [
        // Synchronization: the module is iOS 18 / macOS 15 as a whole.
        .swift6("import Synchronization", #"\bimport\s+Synchronization\b"#),
        .swift6("Mutex", #"\bMutex\b"#),
        .swift6("Atomic", #"\bAtomic\b"#),
        .swift6("AtomicLazyReference", #"\bAtomicLazyReference\b"#),
        .swift6("WordPair", #"\bWordPair\b"#),
        // Task executors (SE-0417).
        .swift6("TaskExecutor", #"\bTaskExecutor\b"#),
        .swift6("Task(executorPreference:)", #"\bexecutorPreference\b"#),
        .swift6("withTaskExecutorPreference", #"\bwithTaskExecutorPreference\b"#),
        .swift6("globalConcurrentExecutor", #"\bglobalConcurrentExecutor\b"#),
        .swift6("UnownedTaskExecutor", #"\bUnownedTaskExecutor\b"#),
        .swift6("asUnownedTaskExecutor", #"\basUnownedTaskExecutor\b"#),
        // Standard library types of Swift 6.0.
        .swift6("Int128", #"\bInt128\b"#),
        .swift6("UInt128", #"\bUInt128\b"#),
        .swift6("RangeSet", #"\bRangeSet\b"#),
        // Observation (`@Observable` and its machinery).
        .swift59("import Observation", #"\bimport\s+Observation\b"#),
        .swift59("@Observable", #"@Observable\b"#),
        .swift59("withObservationTracking", #"\bwithObservationTracking\b"#),
        .swift59("ObservationRegistrar", #"\bObservationRegistrar\b"#),
        // Concurrency of Swift 5.9.
        .swift59("ExecutorJob", #"\bExecutorJob\b"#),
        .swift59("DiscardingTaskGroup", #"\b(Throwing)?DiscardingTaskGroup\b"#),
        .swift59("withDiscardingTaskGroup", #"\bwith(Throwing)?DiscardingTaskGroup\b"#),
        // Foundation (Apple's documentation: iOS 17 / macOS 14).
        .swift59("#Predicate", #"#Predicate\b"#),
        // Swift 6.2.
        .swift62("InlineArray", #"\bInlineArray\b"#),
        .swift62("UTF8Span", #"\bUTF8Span\b"#),
        .swift62("Task.immediate", #"\bTask\s*\.\s*immediate\b"#),
    ]

    /// The uses in `source` (named `file` in the findings) that no guard covers.
    static func findings(in source: String, file: String) throws -> [Finding] {
        let code = SwiftCodeText.blankingCommentsAndStrings(source)
        let guards = availabilityGuards(in: code)
        var findings: [Finding] = []
        for api in newerAPIs {
            // NSRegularExpression, not Regex: Regex's default `\b` follows Unicode's word rules, under
            // which `globalConcurrentExecutor.enqueue` is one word and the name would go unseen.
            let regex = try NSRegularExpression(pattern: api.pattern)
            for match in regex.matches(in: code, range: NSRange(code.startIndex..., in: code)) {
                guard let range = Range(match.range, in: code) else { continue }
                let offset = code.utf8.distance(from: code.startIndex, to: range.lowerBound)
                let covered = guards.contains { $0.range.contains(offset) && $0.covers(api) }
                if !covered {
                    let line = code.utf8.prefix(offset).reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
                    findings.append(Finding(file: file, line: line, api: api.name, iOS: api.iOS, macOS: api.macOS))
                }
            }
        }
        return findings.sorted { ($0.file, $0.line, $0.api) < ($1.file, $1.line, $1.api) }
    }

    /// A block of code that runs only on the versions its guard names.
    struct Guard {
        /// UTF-8 offsets, from the attribute or `#available` to the block's closing brace.
        let range: ClosedRange<Int>
        let versions: [String: Int]

        func covers(_ api: API) -> Bool {
            let needed = ["macOS": api.macOS, "iOS": api.iOS, "tvOS": api.tvOS, "watchOS": api.watchOS,
                          "visionOS": api.visionOS]
            return needed.allSatisfy { platform, version in (versions[platform] ?? 0) >= version }
        }
    }

    /// Every `@available(...)` and `if #available(...)` with platform versions, and the block it guards.
    static func availabilityGuards(in code: String) -> [Guard] {
        let bytes = Array(code.utf8)
        var guards: [Guard] = []
        for marker in ["@available(", "#available("] {
            let needle = Array(marker.utf8)
            var index = 0
            while let start = firstIndex(of: needle, in: bytes, from: index) {
                index = start + needle.count
                if marker == "#available(", previousWord(before: start, in: bytes) == "guard" { continue }
                guard let close = matching(open: UInt8(ascii: "("), close: UInt8(ascii: ")"), from: start + needle.count - 1, in: bytes),
                      let brace = bytes[close...].firstIndex(of: UInt8(ascii: "{")),
                      let end = matching(open: UInt8(ascii: "{"), close: UInt8(ascii: "}"), from: brace, in: bytes)
                else { continue }
                let arguments = String(decoding: bytes[(start + needle.count)..<close], as: UTF8.self)
                let versions = platformVersions(arguments)
                if !versions.isEmpty { guards.append(Guard(range: start...end, versions: versions)) }
            }
        }
        return guards
    }

    /// `macOS 15.0, iOS 18.0, *` as `["macOS": 15, "iOS": 18]` (major versions are what the list needs).
    static func platformVersions(_ arguments: String) -> [String: Int] {
        var versions: [String: Int] = [:]
        for argument in arguments.split(separator: ",") {
            let words = argument.split(separator: " ", omittingEmptySubsequences: true)
            guard words.count == 2, let major = Int(words[1].split(separator: ".")[0]) else { continue }
            versions[String(words[0])] = major
        }
        return versions
    }

    private static func firstIndex(of needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count else { return nil }
        var index = start
        while index + needle.count <= bytes.count {
            if bytes[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// The index of the bracket that closes the one at `from`, counting nesting.
    private static func matching(open: UInt8, close: UInt8, from: Int, in bytes: [UInt8]) -> Int? {
        var depth = 0
        for index in from..<bytes.count {
            if bytes[index] == open { depth += 1 }
            if bytes[index] == close {
                depth -= 1
                if depth == 0 { return index }
            }
        }
        return nil
    }

    private static func previousWord(before index: Int, in bytes: [UInt8]) -> String {
        var end = index
        while end > 0, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\n") { end -= 1 }
        var start = end
        while start > 0, (bytes[start - 1] >= UInt8(ascii: "a") && bytes[start - 1] <= UInt8(ascii: "z")) { start -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
