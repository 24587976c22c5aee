import Foundation
import Testing

/// `docs/ARCHITECTURE.md`'s module map names every folder of `Sources/` and of `Sources/AdTally/`:
/// a folder that appears without its line in the map fails here, so the map stays the tree.
@Suite(.timeLimit(.minutes(3))) struct ArchitectureMapTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func folders(_ path: String) throws -> [String] {
        let url = root.appendingPathComponent(path)
        return try FileManager.default.contentsOfDirectory(atPath: url.path).filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: url.appendingPathComponent(name).path, isDirectory: &isDirectory) && isDirectory.boolValue
        }.sorted()
    }

    @Test func theMapNamesEveryFolder() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let start = try #require(text.range(of: "## Modules"))
        let map = text[start.upperBound...].prefix { _ in true }
        let block = map.split(separator: "```", maxSplits: 2, omittingEmptySubsequences: false)
        #expect(block.count >= 2, "the module map is not a fenced block after ## Modules")
        let lines = block.count >= 2 ? block[1].split(separator: "\n").map(String.init) : []
        // A line of the map starts, at its indentation, with the folders it describes: `Name/`,
        // several as `A/, B/`.
        func named(_ folder: String, indent: Int) -> Bool {
            lines.contains { line in
                let trimmed = line.drop { $0 == " " }
                guard line.count - trimmed.count == indent else { return false }
                let names = trimmed.split(separator: " ").prefix { $0.hasSuffix("/") || $0.hasSuffix("/,") }
                return names.contains { $0.trimmingCharacters(in: CharacterSet(charactersIn: "/,")) == folder }
            }
        }
        for module in try Self.folders("Sources") {
            #expect(named(module, indent: 2), "Sources/\(module)/ is not in docs/ARCHITECTURE.md's module map")
        }
        for folder in try Self.folders("Sources/AdTally") {
            #expect(named(folder, indent: 4), "Sources/AdTally/\(folder)/ is not in docs/ARCHITECTURE.md's module map")
        }
    }
}
