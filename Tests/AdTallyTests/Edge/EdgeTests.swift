@testable import AdTally
import HTTP
@testable import HTTPServer
import Testing

/// The edge applies each route's access in the contract's order before a slice sees the request:
/// the connection cap (never for the probes), the caller's token (`401`, `403`), the path's
/// identifiers (`400 invalid_path`) and a JSON body's media type (`415`); and the slice gets the
/// principal and the checked identifiers.
@Suite(.timeLimit(.minutes(3))) struct EdgeTests {
    static let admin = "edge-admin-token-0001"
    static let reports = "edge-reports-token-001"

    /// An edge with a route of each access kind, each answering what the edge handed it.
    static func router(limits: ClientLimits? = nil) -> Router {
        var edge = Edge(tokens: AccessTokens(admin: [admin], feed: [], reports: [reports]), limits: limits)
        for (path, access) in [("/healthz", Edge.Access.probe), ("/dashboard", .open)] {
            edge.add(.get, path, access) { _ in .inline { _ in .text(.ok, "served") } }
        }
        edge.add(.get, "/v1/reports/ads/{ad_id}", .token(.reports)) { request in
            let principal = request.principal
            let adID = request.path["ad_id"] ?? "none"
            return .inline { _ in .text(.ok, "\(principal) \(adID)") }
        }
        edge.add(.put, "/v1/sessions/{session_id}/feed", .token(.feed, jsonBody: true)) { _ in .inline { _ in .text(.ok, "put") } }
        edge.add(.delete, "/v1/sessions/{session_id}", .admin()) { _ in .inline { _ in .text(.ok, "erased") } }
        return edge.router
    }

    /// The head of `method target` with `headers`, as the parser reads it off the wire.
    static func head(_ method: HTTPMethod, _ target: String, _ headers: [(String, String)] = []) -> HTTPRequestHead {
        let text = "\(method.rawValue) \(target) HTTP/1.1\r\nHost: t\r\n" + headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        guard case .complete(let head, _) = HTTPRequestParser().parseHead(Array(text.utf8)) else {
            Issue.record("the test's own head does not parse: \(text)")
            return HTTPRequestHead(method: .get, target: "/", path: "/", pathSegments: [""], rawQuery: nil, query: QueryParameters(),
                                   version: .http1_1, headers: HTTPHeaders(), bodyFraming: .none, keepAlive: true, expectsContinue: false)
        }
        return head
    }

    /// The status of the answer to `head`, refused at the head or answered by the slice.
    static func status(_ router: Router, _ head: HTTPRequestHead, overCap: Bool = false) async -> (Int, String?) {
        switch router.route(head, requestID: "t", peer: IPAddress("192.0.2.7"), overConnectionCap: overCap) {
        case .refused(_, let response, _):
            return (response.status.code, response.errorCode)
        case .accepted:
            let answer = await router.respond(to: HTTPRequest(head: head, body: []), peer: IPAddress("192.0.2.7"))
            return (answer.response.status.code, nil)
        }
    }

    @Test func aConnectionOverTheCapIsRefusedExceptForTheProbes() async throws {
        let limits = ClientLimits(settings: .init(), resolver: ClientAddressResolver(trusted: AddressRanges()))
        let router = Self.router(limits: limits)
        #expect(await Self.status(router, Self.head(.get, "/healthz"), overCap: true).0 == 200)
        #expect(await Self.status(router, Self.head(.get, "/dashboard"), overCap: true) == (429, "rate_limited"))
        #expect(await Self.status(router, Self.head(.get, "/dashboard")).0 == 200)
        #expect(limits.refusals(.connections) == 1)
    }

    @Test func refusalsComeInTheContractsOrder() async {
        let router = Self.router()
        let bearer = { (token: String) in ("Authorization", "Bearer \(token)") }
        // 401 before 403 before 400 invalid_path before 415.
        #expect(await Self.status(router, Self.head(.put, "/v1/sessions/bad%2Fid/feed")) == (401, "unauthorized"))
        #expect(await Self.status(router, Self.head(.put, "/v1/sessions/bad%2Fid/feed", [bearer(Self.reports)])) == (403, "forbidden"))
        #expect(await Self.status(router, Self.head(.put, "/v1/sessions/bad%2Fid/feed", [bearer(Self.admin)])) == (400, "invalid_path"))
        #expect(await Self.status(router, Self.head(.put, "/v1/sessions/s-1/feed", [bearer(Self.admin)])) == (415, "unsupported_media_type"))
        #expect(await Self.status(router, Self.head(.put, "/v1/sessions/s-1/feed", [bearer(Self.admin), ("Content-Type", "application/json")])).0
                == 200)
        // Every scope for the admin's endpoints; a reports token is known but lacks them.
        #expect(await Self.status(router, Self.head(.delete, "/v1/sessions/s-1", [bearer(Self.reports)])) == (403, "forbidden"))
        #expect(await Self.status(router, Self.head(.delete, "/v1/sessions/s-1", [bearer(Self.admin)])).0 == 200)
    }

    @Test func theSliceGetsThePrincipalAndTheCheckedPath() async throws {
        let router = Self.router()
        let head = Self.head(.get, "/v1/reports/ads/ad-42", [("Authorization", "Bearer \(Self.reports)")])
        let answer = await router.respond(to: HTTPRequest(head: head, body: []))
        guard case .bytes(let body) = answer.response.body else {
            Issue.record("no body")
            return
        }
        #expect(String(decoding: body, as: UTF8.self) == "token(AdTally.AccessTokens.Scopes(rawValue: 2)) ad-42")
    }
}
