import Foundation
import Testing

/// The folders of `Sources/AdTally` depend on each other one way only, and as
/// `docs/ARCHITECTURE.md`'s folder graph draws it. A folder uses another when one of its files
/// names a type declared at the top level of a file of the other (a nested type is reached through
/// its outer one); a name the folder declares itself, at any depth, is its own. Comments and the
/// text of string literals are not code; an interpolation in a string is. There is no list of
/// exceptions: a cycle fails, naming it and a file that makes each of its arrows.
@Suite(.timeLimit(.minutes(3))) struct FolderGraphTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// One arrow of the graph, with the files (and a name each) that make it.
    struct Uses: Equatable {
        var reasons: [String: String] = [:]  // file -> a type it names
    }

    /// The graph of `sources` (folder -> files, each a path and its text): for each folder, the
    /// folders it uses and why.
    static func graph(_ sources: [String: [(path: String, text: String)]]) -> [String: [String: Uses]] {
        var owner: [String: Set<String>] = [:]
        var own: [String: Set<String>] = [:]
        var code: [String: [(path: String, code: String)]] = [:]
        for (folder, files) in sources {
            for file in files {
                let stripped = SwiftCode.strip(file.text)
                code[folder, default: []].append((file.path, stripped))
                for (name, depth) in SwiftCode.declarations(stripped) {
                    own[folder, default: []].insert(name)
                    if depth == 0 { owner[name, default: []].insert(folder) }
                }
            }
        }
        var graph: [String: [String: Uses]] = [:]
        for (folder, files) in code {
            for file in files {
                for name in SwiftCode.typeNames(file.code) where !(own[folder]?.contains(name) ?? false) {
                    for other in owner[name] ?? [] where other != folder {
                        if graph[folder, default: [:]][other, default: Uses()].reasons[file.path] == nil {
                            graph[folder, default: [:]][other, default: Uses()].reasons[file.path] = name
                        }
                    }
                }
            }
        }
        return graph
    }

    /// The shortest cycle through each folder that is on one, each once: `[A, B, A]`.
    static func cycles(_ graph: [String: [String: Uses]]) -> [[String]] {
        var found: [[String]] = []
        var covered: Set<String> = []
        for start in graph.keys.sorted() where !covered.contains(start) {
            // Breadth first from `start` back to it.
            var previous: [String: String] = [:]
            var queue = [start]
            var index = 0
            var closing: String?
            search: while index < queue.count {
                let node = queue[index]
                index += 1
                for next in (graph[node] ?? [:]).keys.sorted() {
                    if next == start { closing = node; break search }
                    if previous[next] == nil { previous[next] = node; queue.append(next) }
                }
            }
            guard var node = closing else { continue }
            var path = [start]
            while node != start { path.insert(node, at: 1); node = previous[node] ?? start }
            path.append(start)
            covered.formUnion(path)
            found.append(path)
        }
        return found
    }

    /// What a cycle's message says: each arrow and a file that makes it.
    static func describe(_ cycle: [String], in graph: [String: [String: Uses]]) -> String {
        var lines = ["cycle " + cycle.joined(separator: " -> ") + ":"]
        for (from, to) in zip(cycle, cycle.dropFirst()) {
            let reasons = graph[from]?[to]?.reasons.sorted { $0.key < $1.key } ?? []
            let shown = reasons.prefix(3).map { "\($0.key) names \($0.value)" }.joined(separator: "; ")
            lines.append("  \(from) -> \(to): \(shown)\(reasons.count > 3 ? " (and \(reasons.count - 3) more files)" : "")")
        }
        return lines.joined(separator: "\n")
    }

    /// Every Swift file under `Sources/AdTally/<folder>/`, by folder.
    static func productSources() throws -> [String: [(path: String, text: String)]] {
        let base = root.appendingPathComponent("Sources/AdTally")
        var sources: [String: [(path: String, text: String)]] = [:]
        let folders = try FileManager.default.contentsOfDirectory(atPath: base.path).sorted()
        for folder in folders {
            let url = base.appendingPathComponent(folder)
            guard let walker = FileManager.default.enumerator(atPath: url.path) else { continue }
            for case let relative as String in walker where relative.hasSuffix(".swift") {
                let text = try String(contentsOf: url.appendingPathComponent(relative), encoding: .utf8)
                sources[folder, default: []].append(("\(folder)/\(relative)", text))
            }
        }
        return sources
    }

    /// The folder graph of `docs/ARCHITECTURE.md`: the fenced block after `## Folder graph`, one
    /// line a folder, `Folder -> A, B` (or `Folder ->` for none), and the order of its lines.
    static func documentedGraph() throws -> (order: [String], uses: [String: Set<String>]) {
        let text = try String(contentsOf: root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        guard let start = text.range(of: "## Folder graph") else { return ([], [:]) }
        let block = text[start.upperBound...].split(separator: "```", maxSplits: 2, omittingEmptySubsequences: false)
        guard block.count >= 2 else { return ([], [:]) }
        var order: [String] = []
        var graph: [String: Set<String>] = [:]
        for line in block[1].split(separator: "\n") {
            let parts = line.components(separatedBy: "->")
            guard parts.count == 2 else { continue }
            let folder = parts[0].trimmingCharacters(in: .whitespaces)
            let uses = parts[1].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            graph[folder] = Set(uses)
            order.append(folder)
        }
        return (order, graph)
    }

    /// The line of the documented graph for `folder`, as the code has it.
    static func line(_ folder: String, _ graph: [String: [String: Uses]]) -> String {
        "\(folder) -> " + (graph[folder] ?? [:]).keys.sorted().joined(separator: ", ")
    }

    @Test func noFolderOfTheProductIsOnACycle() throws {
        let graph = Self.graph(try Self.productSources())
        let cycles = Self.cycles(graph)
        let described = cycles.map { Self.describe($0, in: graph) }.joined(separator: "\n")
        #expect(cycles.isEmpty, "folders of Sources/AdTally depend on each other in a circle:\n\(described)")
    }

    @Test func theDocumentedGraphIsTheCodes() throws {
        let sources = try Self.productSources()
        let graph = Self.graph(sources)
        let (order, documented) = try Self.documentedGraph()
        let folders = Set(sources.keys).union(documented.keys).sorted()
        var wrong: [String] = []
        for folder in folders {
            let actual = Set((graph[folder] ?? [:]).keys)
            if documented[folder] != actual {
                let extra = actual.subtracting(documented[folder] ?? [])
                let why = extra.sorted().compactMap { other in
                    graph[folder]?[other]?.reasons.min { $0.key < $1.key }.map { " (\($0.key) names \($0.value))" }
                }.joined()
                wrong.append(Self.line(folder, graph) + why)
            }
        }
        #expect(wrong.isEmpty, """
            docs/ARCHITECTURE.md's folder graph differs from the code; these lines should read:
            \(wrong.joined(separator: "\n"))
            """)
        // From the top of the house down: every arrow points to a later line.
        let up = order.enumerated().flatMap { index, folder in
            (documented[folder] ?? []).filter { !order[(index + 1)...].contains($0) }.sorted().map { "\(folder) -> \($0)" }
        }
        #expect(up.isEmpty, "docs/ARCHITECTURE.md's folder graph has arrows that point up its list: \(up)")
    }

    // MARK: The check itself

    @Test func aCycleIsFoundAndNamedWithItsFiles() {
        let sources: [String: [(path: String, text: String)]] = [
            "Model": [("Model/Event.swift", "public struct Event { let verdict: Verdict }")],
            "Rules": [("Rules/Verdict.swift", "enum Verdict { case ok }\nstruct Rule { func judge(_ e: Event) -> Verdict { .ok } }")],
            "Routes": [("Routes/Route.swift", "struct Route { let rule: Rule }")],
        ]
        let graph = Self.graph(sources)
        let cycles = Self.cycles(graph)
        #expect(cycles == [["Model", "Rules", "Model"]])
        let text = cycles.first.map { Self.describe($0, in: graph) } ?? ""
        #expect(text.contains("Model -> Rules: Model/Event.swift names Verdict"))
        #expect(text.contains("Rules -> Model: Rules/Verdict.swift names Event"))
    }

    @Test func commentsStringsAndOwnNestedNamesAreNotUses() {
        let sources: [String: [(path: String, text: String)]] = [
            "Model": [("Model/Event.swift", "struct Event {}\nstruct Key {}")],
            "Metrics": [("Metrics/Metrics.swift", """
                // Event is only mentioned.
                /* Event /* nested */ Event */
                struct Metrics {
                    struct Key {}
                    let help = "Event runs \\(count) \\"Event\\""
                    let block = \"\"\"
                        Event
                        \"\"\"
                    let raw = #"Event "\\(Event)" "#
                    let key: Key
                }
                """)],
        ]
        #expect(Self.graph(sources)["Metrics"] == nil)
        let used: [String: [(path: String, text: String)]] = [
            "Model": [("Model/Event.swift", "struct Event {}")],
            "Metrics": [("Metrics/Metrics.swift", #"let help = "runs \(Event.self)""#)],
        ]
        #expect(Self.graph(used)["Metrics"]?["Model"]?.reasons == ["Metrics/Metrics.swift": "Event"])
    }
}

/// A little of Swift's lexical structure: enough to tell code from comments and string text, and to
/// find declarations and the type names code mentions.
enum SwiftCode {
    /// `text` with comments and the text of string literals blanked out (interpolations kept).
    static func strip(_ text: String) -> String {
        let chars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        var i = 0
        // Each open string: its number of `#`, whether it is multi-line, and the parenthesis depth
        // of the interpolation it is in (when `interpolating`).
        struct Literal { var hashes: Int; var multiline: Bool; var depth: Int; var interpolating: Bool }
        var stack: [Literal] = []
        func at(_ k: Int) -> Unicode.Scalar? { k < chars.count ? chars[k] : nil }
        func starts(_ s: String, _ k: Int) -> Bool {
            var k = k
            for c in s.unicodeScalars { guard at(k) == c else { return false }; k += 1 }
            return true
        }
        while i < chars.count {
            let c = chars[i]
            if let top = stack.last, !top.interpolating {
                // Inside string text.
                let closing = (top.multiline ? "\"\"\"" : "\"") + String(repeating: "#", count: top.hashes)
                let escape = "\\" + String(repeating: "#", count: top.hashes)
                if starts(escape + "(", i) {
                    stack[stack.count - 1].interpolating = true
                    stack[stack.count - 1].depth = 1
                    out.append(" ")
                    i += escape.unicodeScalars.count + 1
                } else if starts(escape, i) {
                    i += escape.unicodeScalars.count + 1  // the escaped character too
                } else if starts(closing, i) {
                    stack.removeLast()
                    out.append("\"")
                    i += closing.unicodeScalars.count
                } else {
                    out.append(c == "\n" ? "\n" : " ")
                    i += 1
                }
                continue
            }
            // Code (at the top, or in an interpolation).
            if starts("//", i) {
                while i < chars.count, chars[i] != "\n" { i += 1 }
                continue
            }
            if starts("/*", i) {
                var depth = 0
                repeat {
                    if starts("/*", i) { depth += 1; i += 2 } else if starts("*/", i) { depth -= 1; i += 2 } else { i += 1 }
                } while depth > 0 && i < chars.count
                out.append(" ")
                continue
            }
            var hashes = 0
            while at(i + hashes) == "#" { hashes += 1 }
            if at(i + hashes) == "\"" {
                let multiline = starts("\"\"\"", i + hashes)
                stack.append(Literal(hashes: hashes, multiline: multiline, depth: 0, interpolating: false))
                out.append("\"")
                i += hashes + (multiline ? 3 : 1)
                continue
            }
            if !stack.isEmpty {
                if c == "(" { stack[stack.count - 1].depth += 1 }
                if c == ")" {
                    stack[stack.count - 1].depth -= 1
                    if stack[stack.count - 1].depth == 0 {
                        stack[stack.count - 1].interpolating = false
                        out.append(" ")
                        i += 1
                        continue
                    }
                }
            }
            out.append(c)
            i += 1
        }
        return String(out)
    }

    /// The names of the types (struct, class, enum, protocol, actor, typealias) `code` declares,
    /// with the depth of braces each is declared at (0: the top level of the file).
    static func declarations(_ code: String) -> [(name: String, depth: Int)] {
        var found: [(String, Int)] = []
        var depth = 0
        var previous = ""
        for token in tokens(code) {
            switch token {
            case "{": depth += 1
            case "}": depth -= 1
            default:
                if ["struct", "class", "enum", "protocol", "actor", "typealias"].contains(previous), token.first?.isUppercase == true {
                    found.append((token, depth))
                }
            }
            previous = token
        }
        return found
    }

    /// The identifiers of `code` that start with a capital letter (type names, as Swift writes them).
    static func typeNames(_ code: String) -> Set<String> {
        Set(tokens(code).filter { $0.first?.isUppercase == true })
    }

    /// Identifiers and braces, in order.
    static func tokens(_ code: String) -> [String] {
        var tokens: [String] = []
        var current = ""
        for c in code {
            if c.isLetter || c.isNumber || c == "_" {
                current.append(c)
            } else {
                if !current.isEmpty { tokens.append(current); current = "" }
                if c == "{" || c == "}" { tokens.append(String(c)) }
            }
        }
        if !current.isEmpty { tokens.append(current) }
        return tokens
    }
}
