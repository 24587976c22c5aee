import HTTP
import HTTPServer

/// `GET /dashboard` and its files (API.md section 9): public, holding no data, answered from the
/// binary on the IO queue (`DashboardPage`).
struct DashboardRoutes: Sendable {
    func register(on router: inout Router) {
        for path in DashboardPage.paths {
            guard let asset = DashboardPage.asset(for: path) else { continue }
            router.add(.get, path, .inline { context in
                asset.response(ifNoneMatch: context.request.headers["If-None-Match"])
            })
        }
    }
}
