import AdTally
import AdTallyApp
import Foundation
import Runtime
import Testing

/// docs/openapi.yaml describes exactly the routes the server serves: a route added without
/// documentation, or documentation of a route that does not exist, fails here.
@Suite(.timeLimit(.minutes(5))) struct OpenAPIRouteTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `(METHOD, path)` pairs under `paths:`: path keys at two spaces, operations at four.
    static func documentedRoutes() throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
        let operations: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]
        var routes: Set<String> = []
        var inPaths = false
        var currentPath: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" "), !line.isEmpty, !line.hasPrefix("#") {
                inPaths = line.hasPrefix("paths:")
                currentPath = nil
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   "), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if let path = currentPath, line.hasPrefix("    "), !line.hasPrefix("     "), line.hasSuffix(":") {
                let key = String(line.dropFirst(4).dropLast())
                if operations.contains(key) { routes.insert("\(key.uppercased()) \(path)") }
            }
        }
        return routes
    }

    @Test func specAndRouterAgree() throws {
        var configuration = Configuration()
        configuration.databaseURL = "postgresql://nobody@127.0.0.1:1/none"
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.poolSize = 1
        configuration.logLevel = .error
        let service = AdTallyService(configuration: configuration, migrations: MigrationRunner(migrations: []),
                                     logger: Logger(level: .error) { _ in })
        defer { service.shutdown() }
        let served = Set(service.router.routeTable.map { "\($0.method) \($0.pattern)" })
        let documented = try Self.documentedRoutes()
        #expect(documented.count >= 8)
        #expect(served.subtracting(documented).isEmpty, "served but not in docs/openapi.yaml: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "in docs/openapi.yaml but not served: \(documented.subtracting(served).sorted())")
    }
}
