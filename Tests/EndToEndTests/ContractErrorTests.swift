import Foundation
import Testing

extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct ContractErrors {
        @Test func errorsOverHTTP() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }
            let snapshot = Body.json(["snapshot_id": "s-1", "ads": [Body.ad("ad-1", 0, "acme")]])

            func expectError(_ response: HTTPResponse, _ status: Int, _ code: String, field: String? = nil,
                             sourceLocation: SourceLocation = #_sourceLocation) {
                #expect(response.status == status, "\(response.text)", sourceLocation: sourceLocation)
                #expect(response.errorCode == code, "\(response.text)", sourceLocation: sourceLocation)
                #expect(response.errorMessage?.isEmpty == false, "\(response.text)", sourceLocation: sourceLocation)
                #expect(response.header("Content-Type")?.lowercased().hasPrefix("application/json") == true, sourceLocation: sourceLocation)
                if let field {
                    #expect(response.errorField == field, "\(response.text)", sourceLocation: sourceLocation)
                }
            }

            // Auth.
            let noToken = try server.request("GET", "/v1/sessions/s/feed")
            expectError(noToken, 401, "unauthorized")
            #expect(noToken.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            let wrongToken = try server.request("GET", "/v1/sessions/s/feed", headers: [("Authorization", "Bearer not-the-token")])
            expectError(wrongToken, 401, "unauthorized")
            #expect(wrongToken.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            let putNoToken = try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.jsonType], body: snapshot)
            expectError(putNoToken, 401, "unauthorized")

            // Path.
            expectError(try server.request("GET", "/v1/sessions/bad%2Fid/feed", headers: [Body.auth]), 400, "invalid_path", field: "session_id")
            expectError(try server.request("PUT", "/v1/sessions/bad%2Fid/feed", headers: [Body.jsonType, Body.auth], body: snapshot),
                        400, "invalid_path", field: "session_id")

            // Media type.
            expectError(try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.auth], body: snapshot), 415, "unsupported_media_type")
            expectError(try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.auth, ("Content-Type", "text/plain")], body: snapshot),
                        415, "unsupported_media_type")
            expectError(try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.auth, ("Content-Type", "application/json; charset=latin1")], body: snapshot),
                        415, "unsupported_media_type")
            // Accepted forms of the type, for contrast: case-insensitive, charset utf-8.
            let upper = try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.auth, ("Content-Type", "Application/JSON; charset=UTF-8")], body: snapshot)
            #expect(upper.status == 201, "\(upper.text)")
            expectError(try server.request("POST", "/v1/events", headers: [("Content-Type", "text/plain")], body: Body.json(["events": [[:]]])),
                        415, "unsupported_media_type")

            // Bodies.
            expectError(try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.jsonType, Body.auth], body: Data("not json".utf8)),
                        400, "malformed_json")
            expectError(try server.request("POST", "/v1/events", headers: [Body.jsonType], body: Data("{\"events\": []}".utf8)),
                        400, "malformed_json")
            expectError(try server.request("POST", "/v1/events", headers: [Body.jsonType], body: Data("[1]".utf8)), 400, "malformed_json")
            let tel = Body.json(["snapshot_id": "s-2", "ads": [Body.ad("ad-1", 0, "acme", "tel:+15551234567")]])
            expectError(try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.jsonType, Body.auth], body: tel),
                        422, "invalid_snapshot", field: "ads[0].url")
            let http = Body.json(["snapshot_id": "s-2", "ads": [Body.ad("ad-1", 0, "acme"), Body.ad("ad-2", 1, "acme", "http://acme.example/")]])
            expectError(try server.request("PUT", "/v1/sessions/s/feed", headers: [Body.jsonType, Body.auth], body: http),
                        422, "invalid_snapshot", field: "ads[1].url")

            // Routing.
            expectError(try server.request("GET", "/nope"), 404, "not_found")
            expectError(try server.request("GET", "//healthz"), 404, "not_found")
            let delete = try server.request("DELETE", "/v1/events")
            expectError(delete, 405, "method_not_allowed")
            #expect(delete.header("Allow")?.contains("POST") == true, "Allow: \(delete.header("Allow") ?? "missing")")
            expectError(try server.request("GET", "/v1/sessions/never-seen/feed", headers: [Body.auth]), 404, "not_found")

            // Health, for contrast.
            let health = try server.request("GET", "/healthz")
            #expect(health.status == 200)
            #expect(health.json?["status"] as? String == "ok")

            #expect(server.stop() == 0)

            // The same database, a server without ADTALLY_ADMIN_TOKEN: every admin request is 401.
            let tokenless = try ServerProcess.start(databaseURL: server.databaseURL, adminToken: nil)
            defer { tokenless.kill() }
            expectError(try tokenless.request("GET", "/v1/sessions/s/feed"), 401, "unauthorized")
            expectError(try tokenless.request("GET", "/v1/sessions/s/feed", headers: [Body.auth]), 401, "unauthorized")
            expectError(try tokenless.request("PUT", "/v1/sessions/s/feed", headers: [Body.jsonType, Body.auth], body: snapshot), 401, "unauthorized")
            #expect(tokenless.child.stdout.text.contains("\"level\":\"warning\""), "one warning at start when the token is unset")
            #expect(tokenless.stop() == 0)
        }
    }
}
