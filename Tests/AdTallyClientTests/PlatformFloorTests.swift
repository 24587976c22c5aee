import Foundation
import Testing

/// The client's floor is iOS 16 / macOS 13 / tvOS 16 / watchOS 9 / visionOS 1 (Package.swift,
/// docs/CLIENT.md), but it is built and tested on Linux, where no Apple availability is checked.
/// These tests read the sources an app builds when it depends on AdTallyClient (the library and
/// `Timestamps`, which it links) and fail on an `import Synchronization` or on a use of an API
/// newer than the floor outside a guard for it (`FloorScanner` says which APIs and how far it sees).
@Suite struct PlatformFloorTests {
    /// The package's root, found from this file's path at build time.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func shippedSourcesStayWithinTheFloor() throws {
        var findings: [FloorScanner.Finding] = []
        var scanned: [String] = []
        for folder in ["Sources/AdTallyClient", "Sources/Timestamps"] {
            let directory = Self.root.appendingPathComponent(folder)
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
                .filter { $0.hasSuffix(".swift") }.sorted()
            for name in names {
                let source = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
                findings += try FloorScanner.findings(in: source, file: "\(folder)/\(name)")
                scanned.append("\(folder)/\(name)")
            }
        }
        // A scan that found no files would pass on nothing: the library's files must all be there.
        #expect(scanned.contains("Sources/AdTallyClient/AdTallyTracker.swift"))
        #expect(scanned.contains("Sources/AdTallyClient/Lock.swift"))
        #expect(scanned.contains("Sources/Timestamps/Timestamp.swift"))
        #expect(scanned.count >= 50, "only \(scanned.count) files scanned")
        #expect(findings.isEmpty, "newer than the floor:\n\(findings.map(\.description).joined(separator: "\n"))")
    }

    /// The floor the scan enforces is the one the package declares.
    @Test func packageDeclaresTheFloor() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        #expect(manifest.contains("platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)]"))
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let source: String
        /// `api:line` of every finding, in order.
        let expected: [String]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "an import of Synchronization", source: "import Synchronization\n",
             expected: ["import Synchronization:1"]),
        Case(name: "Mutex in code", source: "import Foundation\nlet lock = Mutex(0)\n", expected: ["Mutex:2"]),
        Case(name: "Atomic in code", source: "let flag = Atomic<Bool>(false)\n", expected: ["Atomic:1"]),
        Case(name: "a name followed by a member", source: "globalConcurrentExecutor.enqueue(ExecutorJob(job))\n",
             expected: ["ExecutorJob:1", "globalConcurrentExecutor:1"]),
        Case(name: "the library's AtomicBool is not Atomic", source: "let flag = AtomicBool(false)\n", expected: []),
        Case(name: "comments and strings are prose",
             source: #"""
             // Mutex
             /* Atomic<Int> /* nested: TaskExecutor */ RangeSet */
             let text = "Mutex and \"Atomic\"", raw = #"ExecutorJob "quoted" "#
             let lines = """
                 withDiscardingTaskGroup
                 """
             """#,
             expected: []),
        Case(name: "an interpolation is code", source: #"let text = "lock: \(Mutex(0))""# + "\n", expected: ["Mutex:1"]),
        Case(name: "a declaration marked for the API's versions",
             source: """
             @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
             extension SenderThread: TaskExecutor {
                 func enqueue(_ job: consuming ExecutorJob) {}
             }
             let executor = globalConcurrentExecutor
             """,
             expected: ["globalConcurrentExecutor:5"]),
        Case(name: "the body of if #available, not its else",
             source: """
             if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *), let thread {
                 task = Task(executorPreference: thread) {}
             } else {
                 task = Task(executorPreference: nil) {}
             }
             """,
             expected: ["Task(executorPreference:):4"]),
        Case(name: "a guard below the API's versions",
             source: """
             if #available(macOS 14.0, iOS 17.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *) {
                 let lock = Mutex(0)
                 let job: ExecutorJob? = nil
             }
             """,
             expected: ["Mutex:2"]),
        Case(name: "a guard that leaves macOS out",
             source: "if #available(iOS 18.0, *) {\n    let lock = Mutex(0)\n}\n", expected: ["Mutex:2"]),
        Case(name: "guard #available is not understood",
             source: """
             guard #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) else { return }
             let lock = Mutex(0)
             """,
             expected: ["Mutex:2"]),
        Case(name: "Observation", source: "import Observation\n@Observable final class Model {}\n",
             expected: ["import Observation:1", "@Observable:2"]),
        Case(name: "URLSession.bytes is iOS 15, within the floor",
             source: "let (bytes, _) = try await URLSession.shared.bytes(for: request)\n", expected: []),
    ]

    /// The scanner reports what it looks for and only that: without this, a scanner that never
    /// matched would pass the shipped sources forever.
    @Test(arguments: cases) func scannerFindsWhatItLooksFor(_ testCase: Case) throws {
        let findings = try FloorScanner.findings(in: testCase.source, file: "case.swift")
        #expect(findings.map { "\($0.api):\($0.line)" } == testCase.expected)
    }
}
