import HTTP
import HTTPServer

/// `GET /dashboard` and its files (API.md section 9): public, holding no data, answered from the
/// binary on the IO queue (`DashboardPage`).
public struct DashboardRoutes: Sendable {
    public init() {}

    public func register(on edge: inout Edge) {
        for path in DashboardPage.paths {
            guard let asset = DashboardPage.asset(for: path) else { continue }
            edge.add(.get, path, .open) { _ in
                .inline { context in asset.response(ifNoneMatch: context.request.headers["If-None-Match"]) }
            }
        }
    }
}
