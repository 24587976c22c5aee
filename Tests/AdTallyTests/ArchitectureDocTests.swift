import Foundation
import Testing

/// What the guides name in backquotes exists, where a check is cheap. The guides are every
/// `docs/*.md` but `docs/API.md` (the HTTP contract: it names JSON members and status codes, not
/// Swift), and `README.md`. `docs/measurements/*.md` are not checked: they are dated records of
/// experiments, and keep the names the code had on the day they measured, renamed since or not.
///
/// A path is a file or folder of the repository, or one its `.gitignore` names (`.data/`, which
/// the scripts make); a file name that reads like Swift (`Package.swift`, `EventStore.swift`,
/// `Dockerfile`) is a file somewhere in it; a name
/// written as Swift writes a type or a member (`UpperCamel`, `Type.member`, `Type.member(label:)`,
/// `lowerCamel`, `name(_:label:)`) is declared in `Sources` or `Tests` (a member in a file that
/// declares or extends its type), a module, or a folder of the product; a single `UpperCamel` name
/// the code uses without declaring it is one of an imported module (`URLSession`, `PQcancel`); an
/// alert's name (`AdTallyNotReady`) is one of `deploy/prometheus/alerts.yml`; a plain word after a
/// file (`` `Events/EventStore.swift` `ingest` ``) is declared in that file. SQL, variables,
/// commands, media types (`text/csv`) and prose in backquotes (`snake_case`, `UPPER_CASE`, words
/// with spaces or symbols) are not Swift names and are not checked; neither is a name of another
/// language or protocol written without backquotes (the Host header, the browser's session storage).
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
        /// Every name the code uses, declared in it or not (a name compiled code uses exists).
        var used: Set<String> = []

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
                    if token.first.map({ $0.isLetter || $0 == "_" }) == true { used.insert(token) }
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
    static func isFileName(_ s: String) -> Bool {
        s.wholeMatch(of: #/[A-Za-z0-9_+-]+(\.[A-Za-z0-9_+-]+)*\.(swift|md|sql|sh|yml|yaml|json|lua|html|js|css|svg|txt|h|c|modulemap|py)/#) != nil
    }
    static func isMediaType(_ s: String) -> Bool {
        s.wholeMatch(of: #/(text|application|image|audio|video|font|multipart|message|model)/[A-Za-z0-9.+-]+(;.*)?/#) != nil
    }

    /// What a guide's names are checked against, besides the code.
    struct Repository {
        /// Whether a path (from the root, `Sources/`, `Sources/AdTally/` or `migrations/`) exists.
        var exists: (String) -> Bool
        /// The folders of `Sources/` and `Sources/AdTally/`.
        var folders: Set<String>
        /// The names of the repository's files, wherever they are.
        var fileNames: Set<String> = []
        /// What `.gitignore` names by a plain name: folders the scripts make (`.data`).
        var ignored: Set<String> = []
        /// The alerts of `deploy/prometheus/alerts.yml`.
        var alerts: Set<String> = []
    }

    /// What is wrong with the names of `text`, given the code and the repository.
    static func problems(_ text: String, declarations: Declarations, repository: Repository) -> [String] {
        var problems: [String] = []
        func chainExists(_ name: String) -> Bool {
            let bare = name.split(separator: "(").first.map(String.init) ?? name
            let chain = bare.split(separator: ".").map(String.init)
            if chain.count == 1, repository.folders.contains(bare) || declarations.modules.contains(bare) { return true }
            if chain.count == 1, bare.first?.isUppercase == true,
               declarations.used.contains(bare) || repository.alerts.contains(bare) { return true }
            return declarations.has(chain)
        }
        func ignored(_ path: String) -> Bool {
            path.split(separator: "/").first.map { repository.ignored.contains(String($0)) } ?? false
        }
        for (span, next) in spans(text) {
            if isPath(span) {
                if repository.exists(span) || ignored(span) || isMediaType(span) {
                } else if let slash = span.lastIndex(of: "/"), repository.exists(String(span[..<slash])),
                          isTypeChain(span[span.index(after: slash)...]) {
                    if !chainExists(String(span[span.index(after: slash)...])) {
                        problems.append("`\(span)`: no type or member of that name in Sources/ or Tests/")
                    }
                } else {
                    problems.append("`\(span)`: no such file or folder in the repository")
                }
                if span.hasSuffix(".swift"), let next, isWord(next) || isCamelMember(next),
                   let file = declarations.byFile.first(where: { $0.key.hasSuffix("/" + span) || $0.key == span })?.value,
                   !file.contains(next) {
                    problems.append("`\(next)` is not declared in `\(span)`")
                }
            } else if isFileName(span), isTypeChain(span[...]) {
                if !repository.exists(span) && !repository.fileNames.contains(span) {
                    problems.append("`\(span)`: no such file in the repository")
                }
            } else if isTypeChain(span[...]) || isCamelMember(span) || isCall(span) {
                if !chainExists(span) && !repository.exists(span) {
                    problems.append("`\(span)`: no type or member of that name in Sources/ or Tests/")
                }
            }
        }
        return problems
    }

    /// The guides, as paths from the repository's root: `README.md` and `docs/*.md` but
    /// `docs/API.md` (not `docs/measurements/`, a folder: only the files directly in `docs/`).
    static func guides() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") && $0 != "API.md" }
            .map { "docs/" + $0 }
        return ["README.md"] + docs.sorted()
    }

    /// The repository as the guides' names are checked against it.
    static func repository() throws -> Repository {
        let folders = Set(try ArchitectureMapTests.folders("Sources") + ArchitectureMapTests.folders("Sources/AdTally"))
        let exists: (String) -> Bool = { path in
            ["", "Sources/", "Sources/AdTally/", "migrations/"].contains {
                FileManager.default.fileExists(atPath: Self.root.appendingPathComponent($0 + path).path)
            }
        }
        var repository = Repository(exists: exists, folders: folders)
        for folder in ["Sources", "Tests", "scripts", "migrations", "deploy", "docs", "Fuzz"] {
            guard let walker = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path) else { continue }
            for case let relative as String in walker {
                repository.fileNames.insert(String(relative.split(separator: "/").last ?? ""))
            }
        }
        let gitignore = (try? String(contentsOf: root.appendingPathComponent(".gitignore"), encoding: .utf8)) ?? ""
        for line in gitignore.split(separator: "\n") {
            let entry = line.trimmingCharacters(in: CharacterSet(charactersIn: "/ "))
            if !entry.isEmpty, !entry.contains("*"), !entry.contains("/") { repository.ignored.insert(entry) }
        }
        let alerts = try String(contentsOf: root.appendingPathComponent("deploy/prometheus/alerts.yml"), encoding: .utf8)
        for match in alerts.matches(of: #/- alert: ([A-Za-z0-9]+)/#) { repository.alerts.insert(String(match.1)) }
        return repository
    }

    @Test func everyNameAGuideGivesExists() throws {
        let declarations = Declarations(Self.code(under: "Sources") + Self.code(under: "Tests"))
        let repository = try Self.repository()
        let guides = try Self.guides()
        #expect(guides.contains("docs/ARCHITECTURE.md") && guides.contains("docs/SCALING.md"), "the guides were not found: \(guides)")
        for guide in guides {
            let text = try String(contentsOf: Self.root.appendingPathComponent(guide), encoding: .utf8)
            let problems = Self.problems(text, declarations: declarations, repository: repository)
            #expect(problems.isEmpty, """
                \(guide) names what the repository does not have (write the current name, or leave \
                the backquotes off what is not a name):
                \(problems.map { "  \(guide): \($0)" }.joined(separator: "\n"))
                """)
        }
    }

    @Test func aNameThatIsNotThereIsFound() {
        let declarations = Declarations([("Sources/AdTally/Events/BatchJudge.swift", "struct BatchJudge { func decide() {} }\nfunc ingest() {}")])
        let text = "`BatchJudge.decide` `EventStore.Judge.decide` `Events/BatchJudge.swift` `ingest` `Events/BatchJudge.swift` `pipeline` `session_ads` `ADTALLY_X`"
        let repository = Repository(exists: { $0 == "Events/BatchJudge.swift" }, folders: ["Events"])
        let problems = Self.problems(text, declarations: declarations, repository: repository)
        #expect(problems == ["`EventStore.Judge.decide`: no type or member of that name in Sources/ or Tests/",
                             "`pipeline` is not declared in `Events/BatchJudge.swift`"])
    }

    /// Files by their names, folders the scripts make, media types, imported types and alerts are
    /// what they say; a file, a type or an alert that is not there is still found.
    @Test func whatIsNotASwiftNameOfTheCodeIsCheckedAsWhatItIs() {
        let declarations = Declarations([("Sources/AdTallyClient/Transport.swift", "import Foundation\nstruct Transport { let session: URLSession }")])
        let text = """
            `Package.swift` `Transport.swift` `Gone.swift` `.data/` `lost/` `text/plain` `image/svg+xml` \
            `URLSession` `URLSession.shared` `AdTallyNotReady` `AdTallyGone` `NoSuchType.member`
            """
        let repository = Repository(exists: { $0 == "Package.swift" }, folders: [], fileNames: ["Transport.swift"],
                                    ignored: [".data"], alerts: ["AdTallyNotReady"])
        let problems = Self.problems(text, declarations: declarations, repository: repository)
        #expect(problems == ["`Gone.swift`: no such file in the repository",
                             "`lost/`: no such file or folder in the repository",
                             "`URLSession.shared`: no type or member of that name in Sources/ or Tests/",
                             "`AdTallyGone`: no type or member of that name in Sources/ or Tests/",
                             "`NoSuchType.member`: no type or member of that name in Sources/ or Tests/"])
    }
}
