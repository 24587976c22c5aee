import Foundation
import Testing

/// The folders of `Sources/AdTally` depend on each other one way only, and as
/// `docs/ARCHITECTURE.md`'s folder graph draws it. A folder uses another when one of its files
/// names a type declared at the top level of a file of the other (a nested type is reached through
/// its outer one), or uses a member (`.name`) that the other declares in an extension, of its own
/// types or of any other (`extension String { func utf8Precedes }`): an extension member is reached
/// without naming the folder's types, so a name alone would miss it. A name the folder declares
/// itself, at any depth, is its own. Comments and the text of string literals are not code; an
/// interpolation in a string is. There is no list of exceptions: a cycle fails, naming it and a file
/// that makes each of its arrows; so does a folder that uses more than `maximumUses` others.
@Suite(.timeLimit(.minutes(3))) struct FolderGraphTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// One arrow of the graph, with the files (and a name each) that make it.
    struct Uses: Equatable {
        var reasons: [String: String] = [:]  // file -> a type it names
    }

    /// The graph of `sources` (folder -> files, each a path and its text): for each folder, the
    /// folders it uses and why.
    /// The most other folders one folder may use: a folder that needs more is a hub, which the
    /// composition root (the `AdTallyApp` module, not a folder) is the only place for.
    static let maximumUses = 8

    /// `ambiguous`: member names declared in the other modules too, whose uses cannot be told
    /// apart (an extension member here may not have one: `extensionMembersAreNamedForTheirFolder`).
    static func graph(_ sources: [String: [(path: String, text: String)]], ambiguous: Set<String> = []) -> [String: [String: Uses]] {
        var owner: [String: Set<String>] = [:]
        var extensionOwner: [String: Set<String>] = [:]
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
                own[folder, default: []].formUnion(SwiftCode.memberDeclarations(stripped))
                for name in SwiftCode.extensionMembers(stripped) { extensionOwner[name, default: []].insert(folder) }
            }
        }
        var graph: [String: [String: Uses]] = [:]
        func use(_ folder: String, _ other: String, _ path: String, _ reason: String) {
            if graph[folder, default: [:]][other, default: Uses()].reasons[path] == nil {
                graph[folder, default: [:]][other, default: Uses()].reasons[path] = reason
            }
        }
        for (folder, files) in code {
            for file in files {
                for name in SwiftCode.typeNames(file.code) where !(own[folder]?.contains(name) ?? false) {
                    for other in owner[name] ?? [] where other != folder { use(folder, other, file.path, name) }
                }
                for name in SwiftCode.memberUses(file.code) where !(own[folder]?.contains(name) ?? false) && !ambiguous.contains(name) {
                    for other in extensionOwner[name] ?? [] where other != folder { use(folder, other, file.path, "." + name) }
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

    /// The modules `AdTally` imports: the only other code its `.name` uses can reach.
    static let dependencies = ["Contract", "HTTP", "HTTPServer", "JSON", "Postgres", "Runtime", "Timestamps"]

    /// The member names the modules `AdTally` depends on declare (`SwiftCode.apiDeclarations`).
    static func otherModulesMembers() throws -> Set<String> {
        let base = root.appendingPathComponent("Sources")
        var names: Set<String> = []
        for module in dependencies {
            guard let walker = FileManager.default.enumerator(atPath: base.appendingPathComponent(module).path) else { continue }
            for case let relative as String in walker where relative.hasSuffix(".swift") {
                let text = try String(contentsOf: base.appendingPathComponent(module).appendingPathComponent(relative), encoding: .utf8)
                names.formUnion(SwiftCode.apiDeclarations(SwiftCode.strip(text)))
            }
        }
        return names
    }

    /// The graph of the product's folders as the tests read it.
    static func productGraph() throws -> [String: [String: Uses]] {
        graph(try productSources(), ambiguous: try otherModulesMembers())
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

    @Test func noFolderUsesMoreThanEightOthers() throws {
        let graph = try Self.productGraph()
        let hubs = graph.filter { $0.value.count > Self.maximumUses }.map { "\($0.key) uses \($0.value.count): \($0.value.keys.sorted().joined(separator: ", "))" }
        #expect(hubs.isEmpty, "folders of Sources/AdTally that use more than \(Self.maximumUses) others:\n\(hubs.sorted().joined(separator: "\n"))")
    }

    /// An extension member's uses are found by its name alone, so no other module may declare a
    /// member of that name (`row.decode` of Postgres would count as a use of a folder's
    /// `decode`): an extension member is named for what it does here, or is an initializer.
    @Test func extensionMembersAreNamedForTheirFolder() throws {
        let others = try Self.otherModulesMembers()
        var clashes: [String] = []
        for (folder, files) in try Self.productSources() {
            for file in files {
                for name in SwiftCode.extensionMembers(SwiftCode.strip(file.text)) where others.contains(name) {
                    clashes.append("\(file.path) (\(folder)) declares .\(name) in an extension, a name another module declares too")
                }
            }
        }
        #expect(clashes.isEmpty, "\(clashes.sorted().joined(separator: "\n"))")
    }

    @Test func noFolderOfTheProductIsOnACycle() throws {
        let graph = try Self.productGraph()
        let cycles = Self.cycles(graph)
        let described = cycles.map { Self.describe($0, in: graph) }.joined(separator: "\n")
        #expect(cycles.isEmpty, "folders of Sources/AdTally depend on each other in a circle:\n\(described)")
    }

    @Test func theDocumentedGraphIsTheCodes() throws {
        let sources = try Self.productSources()
        let graph = try Self.productGraph()
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

    @Test func anExtensionMemberUsedElsewhereIsAnArrow() {
        let sources: [String: [(path: String, text: String)]] = [
            "Model": [("Model/String+Order.swift", "extension String {\n    func utf8Precedes(_ other: String) -> Bool { true }\n    static let quote = 1\n}")],
            "JSON": [("JSON/Writer.swift", "struct Writer { func sorted(_ keys: [String]) -> [String] { keys.sorted { $0.utf8Precedes($1) } } }")],
            "Other": [("Other/Own.swift", "struct Own { func utf8Precedes() {} }\nstruct User { func f(_ o: Own) { o.utf8Precedes() } }")],
        ]
        let graph = Self.graph(sources)
        #expect(graph["JSON"]?["Model"]?.reasons == ["JSON/Writer.swift": ".utf8Precedes"])
        #expect(graph["Other"] == nil, "a folder that declares the name itself is not counted as using another's")
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

    /// The names of the members (functions, properties, cases, nested types) `code` declares at any
    /// depth: what a folder owns besides its top-level types.
    static func memberDeclarations(_ code: String) -> Set<String> {
        var found: Set<String> = []
        var previous = ""
        for token in tokens(code) {
            if ["func", "var", "let", "case"].contains(previous), token.first.map({ $0.isLetter || $0 == "_" }) == true {
                found.insert(token)
            }
            previous = token
        }
        return found
    }

    /// The names a module offers as members: every function, and the properties and cases declared
    /// directly in a type or extension (not the local variables of its functions).
    static func apiDeclarations(_ code: String) -> Set<String> {
        var found: Set<String> = []
        var depth = 0
        var previous = ""
        for token in tokens(code) {
            switch token {
            case "{": depth += 1
            case "}": depth -= 1
            default:
                if token.first.map({ $0.isLetter || $0 == "_" }) == true,
                   previous == "func" || (depth == 1 && ["var", "let", "case"].contains(previous)) {
                    found.insert(token)
                }
            }
            previous = token
        }
        return found
    }

    /// The names of the members `code` declares inside an `extension` (directly in its body, not
    /// inside a function's), which other code reaches as `.name` without naming a type of the
    /// folder; `private` and `fileprivate` ones, which no other file reaches, are left out.
    static func extensionMembers(_ code: String) -> Set<String> {
        var found: Set<String> = []
        var depth = 0
        var extensionDepth: Int?
        var sawExtension = false
        var previous = ""
        var hidden = false
        for token in tokens(code) {
            switch token {
            case "{":
                depth += 1
                if sawExtension, extensionDepth == nil { extensionDepth = depth }
                sawExtension = false
                hidden = false
            case "}":
                if depth == extensionDepth { extensionDepth = nil }
                depth -= 1
                hidden = false
            default:
                if token == "extension", extensionDepth == nil { sawExtension = true }
                if token == "private" || token == "fileprivate" { hidden = true }
                if let level = extensionDepth, depth == level, ["func", "var", "let", "case"].contains(previous),
                   token.first.map({ $0.isLetter || $0 == "_" }) == true {
                    if !hidden { found.insert(token) }
                    hidden = false
                }
            }
            previous = token
        }
        return found
    }

    /// The names `code` reaches as members: an identifier right after a `.`.
    static func memberUses(_ code: String) -> Set<String> {
        var found: Set<String> = []
        var current = ""
        var afterDot = false
        var dotPending = false
        for c in code {
            if c.isLetter || c.isNumber || c == "_" {
                if current.isEmpty { afterDot = dotPending }
                current.append(c)
                dotPending = false
            } else {
                if !current.isEmpty, afterDot, current.first.map({ !$0.isNumber }) == true { found.insert(current) }
                current = ""
                afterDot = false
                dotPending = c == "." ? true : (c == " " || c == "\n" || c == "\t") ? dotPending : false
            }
        }
        if !current.isEmpty, afterDot { found.insert(current) }
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
