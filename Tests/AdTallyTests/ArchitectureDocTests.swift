import Foundation
import Testing

/// What `docs/ARCHITECTURE.md` names in backquotes exists, where a check is cheap: a path is a file
/// or folder of the repository; a name written as Swift writes a type or a member
/// (`UpperCamel`, `Type.member`, `Type.member(label:)`, `lowerCamel`, `name(_:label:)`) is declared
/// in `Sources` or `Tests` (a member in a file that declares or extends its type), a module, or a
/// folder of the product; a plain word after a file (`` `Events/EventStore.swift` `ingest` ``) is
/// declared in that file. SQL, variables, commands and prose in backquotes (`snake_case`,
/// `UPPER_CASE`, words with spaces or symbols) are not Swift names and are not checked.
@Suite(.timeLimit(.minutes(3))) struct ArchitectureDocTests {
    static let root = ArchitectureMapTests.root

    /// The Swift files under `folder` of the repository, as text without comments and strings.
    static func code(under folder: String) -> [(path: String, code: String)] {
        let base = root.appendingPathComponent(folder)
        guard let walker = FileManager.default.enumerator(atPath: base.path) else { return [] }
        var files: [(String, String)] = []
        for case let relative as String in walker where relative.hasSuffix(".swift") {
            guard let text = try? String(contentsOf: base.appendingPathComponent(relative), encoding: .utf8) else { continue }
            files.append(("\(folder)/\(relative)", SwiftCode.strip(text)))
        }
        return files
    }

    /// What the code declares: every name (types, functions, properties, cases), and per file the
    /// names it declares and the types it declares or extends.
    struct Declarations {
        var names: Set<String> = []
        var byFile: [String: Set<String>] = [:]
        var typesByFile: [String: Set<String>] = [:]
        var modules: Set<String> = []

        init(_ files: [(path: String, code: String)]) {
            for (path, code) in files {
                var declared: Set<String> = []
                var types: Set<String> = []
                var previous = ""
                var inCaseList = false
                for token in Self.words(code) {
                    if token == "\n" || token == "{" || token == "(" || token == "=" { inCaseList = false }
                    if ["func", "var", "let", "case", "struct", "class", "enum", "protocol", "actor", "typealias", "associatedtype"].contains(previous),
                       token.first.map({ $0.isLetter || $0 == "_" }) == true {
                        declared.insert(token)
                        if previous == "case" { inCaseList = true }
                    } else if inCaseList, previous == ",", token.first?.isLetter == true {
                        declared.insert(token)
                    }
                    if ["struct", "class", "enum", "protocol", "actor", "extension"].contains(previous) { types.insert(token) }
                    if previous == "import" { modules.insert(token) }
                    if token == "init" { declared.insert("init") }
                    previous = token
                }
                names.formUnion(declared)
                byFile[path] = declared
                typesByFile[path] = types
            }
        }

        /// Words, newlines and the punctuation that ends a list of cases.
        static func words(_ code: String) -> [String] {
            var tokens: [String] = []
            var current = ""
            for c in code {
                if c.isLetter || c.isNumber || c == "_" {
                    current.append(c)
                } else {
                    if !current.isEmpty { tokens.append(current); current = "" }
                    if "\n{(=,".contains(c) { tokens.append(String(c)) }
                }
            }
            if !current.isEmpty { tokens.append(current) }
            return tokens
        }

        /// Whether `chain` (`A`, `A.b`, `A.B.c`) is declared: its first name a type (or a module,
        /// then the rest checked alone), each later one declared in a file that declares or
        /// extends the one before.
        func has(_ chain: [String]) -> Bool {
            guard let first = chain.first else { return false }
            if modules.contains(first), chain.count > 1 { return has(Array(chain.dropFirst())) || chain.count == 2 }
            guard names.contains(first) else { return false }
            for (outer, inner) in zip(chain, chain.dropFirst()) {
                let found = typesByFile.contains { path, types in types.contains(outer) && (byFile[path]?.contains(inner) ?? false) }
                if !found { return false }
            }
            return true
        }
    }

    /// The backquoted spans of `text`, each with the span that follows it after one space (if any).
    static func spans(_ text: String) -> [(span: String, next: String?)] {
        let parts = text.components(separatedBy: "`")
        var spans: [(String, String?)] = []
        var index = 1
        while index < parts.count {
            let next = index + 2 < parts.count && parts[index + 1] == " " ? parts[index + 2] : nil
            spans.append((parts[index], next))
            index += 2
        }
        return spans
    }

    static func isPath(_ s: String) -> Bool { s.wholeMatch(of: #/[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]*)+/#) != nil }
    static func isTypeChain(_ s: Substring) -> Bool {
        s.wholeMatch(of: #/[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*(\([A-Za-z_:]*\))?/#) != nil
    }
    static func isCamelMember(_ s: String) -> Bool { s.wholeMatch(of: #/[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*(\([A-Za-z_:]*\))?/#) != nil }
    static func isCall(_ s: String) -> Bool { s.wholeMatch(of: #/[a-z][A-Za-z0-9]*\([A-Za-z_:]*\)/#) != nil }
    static func isWord(_ s: String) -> Bool { s.wholeMatch(of: #/[a-z][A-Za-z0-9]*/#) != nil }

    /// What is wrong with the names of `text`, given the code and the folders that exist.
    static func problems(_ text: String, declarations: Declarations, exists: (String) -> Bool, folders: Set<String>) -> [String] {
        var problems: [String] = []
        func chainExists(_ name: String) -> Bool {
            let bare = name.split(separator: "(").first.map(String.init) ?? name
            let chain = bare.split(separator: ".").map(String.init)
            if chain.count == 1, folders.contains(bare) || declarations.modules.contains(bare) { return true }
            return declarations.has(chain)
        }
        for (span, next) in spans(text) {
            if isPath(span) {
                if exists(span) { } else if let slash = span.lastIndex(of: "/"), exists(String(span[..<slash])),
                                             isTypeChain(span[span.index(after: slash)...]) {
                    if !chainExists(String(span[span.index(after: slash)...])) { problems.append("`\(span)`: no such declaration") }
                } else {
                    problems.append("`\(span)`: no such file or folder")
                }
                if span.hasSuffix(".swift"), let next, isWord(next) || isCamelMember(next),
                   let file = declarations.byFile.first(where: { $0.key.hasSuffix("/" + span) || $0.key == span })?.value,
                   !file.contains(next) {
                    problems.append("`\(next)` is not declared in `\(span)`")
                }
            } else if isTypeChain(span[...]) || isCamelMember(span) || isCall(span) {
                if !chainExists(span) { problems.append("`\(span)`: no such declaration") }
            }
        }
        return problems
    }

    @Test func everyNameTheArchitectureGivesExists() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let declarations = Declarations(Self.code(under: "Sources") + Self.code(under: "Tests"))
        let folders = Set(try ArchitectureMapTests.folders("Sources") + ArchitectureMapTests.folders("Sources/AdTally"))
        let exists: (String) -> Bool = { path in
            ["", "Sources/", "Sources/AdTally/", "migrations/"].contains {
                FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0 + path).path)
            }
        }
        let problems = Self.problems(text, declarations: declarations, exists: exists, folders: folders)
        #expect(problems.isEmpty, "docs/ARCHITECTURE.md names what the code does not have:\n\(problems.joined(separator: "\n"))")
    }

    @Test func aNameThatIsNotThereIsFound() {
        let declarations = Declarations([("Sources/AdTally/Events/BatchJudge.swift", "struct BatchJudge { func decide() {} }\nfunc ingest() {}")])
        let text = "`BatchJudge.decide` `EventStore.Judge.decide` `Events/BatchJudge.swift` `ingest` `Events/BatchJudge.swift` `pipeline` `session_ads` `ADTALLY_X`"
        let problems = Self.problems(text, declarations: declarations, exists: { $0 == "Events/BatchJudge.swift" }, folders: ["Events"])
        #expect(problems == ["`EventStore.Judge.decide`: no such declaration", "`pipeline` is not declared in `Events/BatchJudge.swift`"])
    }
}
