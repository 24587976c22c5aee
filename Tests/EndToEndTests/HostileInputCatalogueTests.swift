import Foundation
import Testing

/// A catalogue of hostile requests sent as exact bytes over the network to the real server, each with
/// the answer API.md prescribes (status, error code, `field`, and `Connection: close` where the contract
/// says the connection closes). None of them may store an event; afterwards a normal feed and one valid
/// impression still work, and the database holds exactly that one event.
extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct HostileInputCatalogue {
        /// What one entry must get back.
        enum Expected {
            /// An error response: status, `error.code`, and `error.field` when given.
            case error(Int, String, field: String? = nil)
            /// Either of two error answers (where API.md allows both).
            case eitherError((Int, String), (Int, String))
            /// `200` from `POST /v1/events`: one rejected `invalid_event` with that `field` (nil: none).
            case invalidEvent(field: String?)
            /// A success status with no error body (control entries).
            case success(Int)
        }

        struct Entry {
            let name: String
            let bytes: [UInt8]
            let expected: Expected
            /// Extra checks on the response (headers such as `Allow`, `WWW-Authenticate`).
            var check: (@Sendable (HTTPResponse) -> String?)? = nil
            /// A product defect already reported: the entry still asserts the contract, inside
            /// `withKnownIssue`, so the suite stays green until the fix lands and then says so.
            var knownDefect: String? = nil
        }

        static let token = ServerProcess.adminToken

        // MARK: Building requests

        /// A request as bytes: `method target version`, `Host`, the headers, `Content-Length` when a
        /// body is given (unless `length` is false), the body.
        static func raw(_ method: String, _ target: String, version: String = "HTTP/1.1",
                        _ headers: [(String, String)] = [], body: [UInt8]? = nil, length: Bool = true) -> [UInt8] {
            var head = "\(method) \(target) \(version)\r\nHost: 127.0.0.1\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            if let body, length { head += "Content-Length: \(body.count)\r\n" }
            head += "\r\n"
            return Array(head.utf8) + (body ?? [])
        }

        static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

        static let json = ("Content-Type", "application/json")
        static let auth = ("Authorization", "Bearer \(token)")

        /// `POST /v1/events` with a JSON content type and `body`.
        static func postEvents(_ body: [UInt8], _ extra: [(String, String)] = []) -> [UInt8] {
            raw("POST", "/v1/events", [json] + extra, body: body)
        }

        /// `PUT /v1/sessions/{session}/feed` with the admin token and a JSON content type.
        static func putFeed(_ body: [UInt8], session: String = "cat-snap-session") -> [UInt8] {
            raw("PUT", "/v1/sessions/\(session)/feed", [json, auth], body: body)
        }

        /// `GET /v1/sessions/{session}/feed` with the admin token.
        static func getFeed(_ session: String) -> [UInt8] {
            raw("GET", "/v1/sessions/\(session)/feed", [auth])
        }

        /// One event as JSON text; every value is raw JSON text so that numbers such as `1e400` and
        /// invalid strings can be written. `overrides` replace members (nil removes one).
        static func event(_ overrides: [String: String?] = [:]) -> String {
            var members: [(String, String)] = [
                ("event_id", "\"\(UUID().uuidString.lowercased())\""),
                ("type", "\"impression\""),
                ("session_id", "\"cat-session\""),
                ("ad_id", "\"cat-ad\""),
                ("occurred_at", "\"\(Body.now())\""),
            ]
            for (key, value) in overrides.sorted(by: { $0.key < $1.key }) {
                if let index = members.firstIndex(where: { $0.0 == key }) {
                    if let value { members[index].1 = value } else { members.remove(at: index) }
                } else if let value {
                    members.append((key, value))
                }
            }
            return "{" + members.map { "\"\($0.0)\": \($0.1)" }.joined(separator: ", ") + "}"
        }

        /// A snapshot with one ad, the ad's members overridable as raw JSON text.
        static func snapshot(_ ad: [String: String] = [:], snapshotID: String = "\"cat-snap\"") -> [UInt8] {
            var members = ["ad_id": "\"cat-ad\"", "position": "0", "advertiser_id": "\"acme\"", "url": "\"https://acme.example/\""]
            for (key, value) in ad { members[key] = value }
            let adText = ["ad_id", "position", "advertiser_id", "url"].map { "\"\($0)\": \(members[$0]!)" }.joined(separator: ", ")
            return bytes("{\"snapshot_id\": \(snapshotID), \"ads\": [{\(adText)}]}")
        }

        // MARK: The catalogue

        static func catalogue() -> [Entry] {
            var entries: [Entry] = []
            func add(_ name: String, _ bytes: [UInt8], _ expected: Expected, check: (@Sendable (HTTPResponse) -> String?)? = nil,
                     knownDefect: String? = nil) {
                entries.append(Entry(name: name, bytes: bytes, expected: expected, check: check, knownDefect: knownDefect))
            }
            let badRequest = Expected.error(400, "bad_request")
            func allowContains(_ methods: [String]) -> @Sendable (HTTPResponse) -> String? {
                { response in
                    let allow = response.header("Allow") ?? ""
                    let listed = allow.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                    return methods.allSatisfy(listed.contains) ? nil : "Allow \(allow) lacks \(methods)"
                }
            }
            let wwwAuthenticate: @Sendable (HTTPResponse) -> String? = { response in
                response.header("WWW-Authenticate")?.lowercased().hasPrefix("bearer") == true ? nil : "no WWW-Authenticate: Bearer"
            }

            // Request line.
            add("method with a ( in it", bytes("GE(T /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("method with an @ in it", bytes("G@T /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("empty method (line starts with a space)", bytes(" /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("NUL in the method", bytes("GE\0T /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("missing version", bytes("GET /healthz\r\nHost: x\r\n\r\n"), badRequest)
            add("HTTP/2.0", bytes("GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n"), .error(505, "http_version_not_supported"))
            add("HTTP/3.0", bytes("GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n"), .error(505, "http_version_not_supported"))
            add("HTTP/0.9", bytes("GET /healthz HTTP/0.9\r\nHost: x\r\n\r\n"), .error(505, "http_version_not_supported"))
            add("HTTP/1.1x", bytes("GET /healthz HTTP/1.1x\r\nHost: x\r\n\r\n"), badRequest)
            add("HTTP/11.1", bytes("GET /healthz HTTP/11.1\r\nHost: x\r\n\r\n"), badRequest)
            add("lowercase http/1.1", bytes("GET /healthz http/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("HTTP/1.", bytes("GET /healthz HTTP/1.\r\nHost: x\r\n\r\n"), badRequest)
            add("two spaces after the method", bytes("GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("two spaces before the version", bytes("GET /healthz  HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("space after the version", bytes("GET /healthz HTTP/1.1 \r\nHost: x\r\n\r\n"), badRequest)
            add("tab instead of space", bytes("GET\t/healthz HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("bare LF line endings", bytes("GET /healthz HTTP/1.1\nHost: x\n\n"), badRequest)
            add("bare CR ending the request line", bytes("GET /healthz HTTP/1.1\rHost: x\r\n\r\n"), badRequest)
            add("NUL in the target", bytes("GET /heal\0thz HTTP/1.1\r\nHost: x\r\n\r\n"), badRequest)
            add("raw 0xFF byte in the target", [UInt8]("GET /v1/sessions/".utf8) + [0xFF] + [UInt8]("/feed HTTP/1.1\r\nHost: x\r\n\r\n".utf8), badRequest)
            add("lowercase method is another method", bytes("get /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), .error(405, "method_not_allowed"),
                check: allowContains(["GET"]))

            // Header syntax.
            add("bare LF inside the headers", bytes("GET /healthz HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n"), badRequest)
            add("NUL in a header value", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"), badRequest)
            add("control character 0x01 in a header value", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\u{01}b\r\n\r\n"), badRequest)
            add("DEL in a header value", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\u{7F}b\r\n\r\n"), badRequest)
            add("space before the colon", bytes("GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n"), badRequest)
            add("obsolete line folding", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n"), badRequest)
            add("empty field name", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n"), badRequest)
            add("( in a field name", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\nX-F(o: v\r\n\r\n"), badRequest)
            add("non-ASCII field name", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Ünï: v\r\n\r\n"), badRequest)
            add("header line without a colon", bytes("GET /healthz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n"), badRequest)

            // Smuggling shapes.
            let small = bytes(event())
            add("Content-Length and Transfer-Encoding", raw("POST", "/v1/events", [json, ("Content-Length", "\(small.count)"), ("Transfer-Encoding", "chunked")],
                                                             body: bytes("\(String(small.count, radix: 16))\r\n") + small + bytes("\r\n0\r\n\r\n"), length: false), badRequest)
            add("Transfer-Encoding then Content-Length", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked"), ("Content-Length", "5")],
                                                              body: bytes("0\r\n\r\n"), length: false), badRequest)
            add("two different Content-Length fields", raw("POST", "/v1/events", [json, ("Content-Length", "2"), ("Content-Length", "3")],
                                                          body: bytes("{} "), length: false), badRequest)
            add("Content-Length list with different values", raw("POST", "/v1/events", [json, ("Content-Length", "2, 3")], body: bytes("{} "), length: false), badRequest)
            add("Content-Length +2", raw("POST", "/v1/events", [json, ("Content-Length", "+2")], body: bytes("{}"), length: false), badRequest)
            add("Content-Length -2", raw("POST", "/v1/events", [json, ("Content-Length", "-2")], body: bytes("{}"), length: false), badRequest)
            add("Content-Length in hex", raw("POST", "/v1/events", [json, ("Content-Length", "0x2")], body: bytes("{}"), length: false), badRequest)
            add("Content-Length with an inner space", raw("POST", "/v1/events", [json, ("Content-Length", "1 1")], body: bytes("{}"), length: false), badRequest)
            add("Content-Length empty", raw("POST", "/v1/events", [json, ("Content-Length", "")], body: bytes("{}"), length: false), badRequest)
            add("Content-Length 2.0", raw("POST", "/v1/events", [json, ("Content-Length", "2.0")], body: bytes("{}"), length: false), badRequest)
            add("Transfer-Encoding gzip", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "gzip")], body: bytes("0\r\n\r\n"), length: false), badRequest)
            add("Transfer-Encoding chunked, identity", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked, identity")],
                                                            body: bytes("0\r\n\r\n"), length: false), badRequest)
            add("Transfer-Encoding gzip, chunked", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "gzip, chunked")],
                                                        body: bytes("0\r\n\r\n"), length: false), badRequest)
            add("Transfer-Encoding chunked twice", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")],
                                                        body: bytes("0\r\n\r\n"), length: false), badRequest)
            add("chunk size zz", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked")], body: bytes("zz\r\n{}\r\n0\r\n\r\n"), length: false), badRequest)
            add("chunk size -2", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked")], body: bytes("-2\r\n{}\r\n0\r\n\r\n"), length: false), badRequest)
            add("chunk size 0x2", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked")], body: bytes("0x2\r\n{}\r\n0\r\n\r\n"), length: false), badRequest)
            add("chunk data longer than its size", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked")], body: bytes("1\r\n{}\r\n0\r\n\r\n"), length: false), badRequest)
            // Overflowing a 64-bit size: refused either as bad syntax or as over the body limit; both close.
            add("chunk size overflowing 64 bits", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked")],
                                                       body: bytes("10000000000000000000002\r\n{}\r\n0\r\n\r\n"), length: false),
                .eitherError((400, "bad_request"), (413, "payload_too_large")))

            // Oversize.
            add("target over 8 KiB", raw("GET", "/healthz?pad=" + String(repeating: "a", count: 8 * 1024 + 10)), .error(414, "uri_too_long"))
            add("target over 8 KiB and head over 16 KiB", raw("GET", "/healthz?pad=" + String(repeating: "a", count: 8 * 1024 + 10),
                                                                 [("X-Pad", String(repeating: "b", count: 17 * 1024))]), .error(414, "uri_too_long"))
            add("one header field over 16 KiB", raw("GET", "/healthz", [("X-Pad", String(repeating: "b", count: 17 * 1024))]), .error(431, "headers_too_large"))
            add("head over 16 KiB in many fields", raw("GET", "/healthz", (0..<20).map { ("X-Pad-\($0)", String(repeating: "c", count: 1000)) }),
                .error(431, "headers_too_large"))
            add("101 header fields", raw("GET", "/healthz", (0..<100).map { ("X-F\($0)", "v") }), .error(431, "headers_too_large"))
            add("101 header fields and HTTP/2.0: 431 before 505", raw("GET", "/healthz", version: "HTTP/2.0", (0..<100).map { ("X-F\($0)", "v") }),
                .error(431, "headers_too_large"))
            add("101 header fields and a malformed one: 400 first", raw("GET", "/healthz", (0..<100).map { ("X-F\($0)", "v") } + [("Bad Name", "v")]),
                badRequest)
            add("HTTP/2.0 with Content-Length and Transfer-Encoding: 400 first",
                raw("POST", "/v1/events", version: "HTTP/2.0", [json, ("Content-Length", "5"), ("Transfer-Encoding", "chunked")], body: bytes("0\r\n\r\n"), length: false),
                badRequest)
            add("Content-Length 1 MiB + 1 (no body sent)", raw("POST", "/v1/events", [json, ("Content-Length", "\(1024 * 1024 + 1)")]),
                .error(413, "payload_too_large"))
            add("Content-Length of 30 digits", raw("POST", "/v1/events", [json, ("Content-Length", String(repeating: "9", count: 30))]),
                .error(413, "payload_too_large"))
            add("Expect: 100-continue with Content-Length over 1 MiB", raw("POST", "/v1/events", [json, ("Expect", "100-continue"), ("Content-Length", "\(2 * 1024 * 1024)")]),
                .error(413, "payload_too_large"), check: { response in response.status == 100 ? "100 Continue for a refused body" : nil })
            var chunked: [UInt8] = []
            for _ in 0..<17 { chunked += bytes("10000\r\n") + [UInt8](repeating: UInt8(ascii: " "), count: 0x10000) + bytes("\r\n") }
            chunked += bytes("0\r\n\r\n")
            add("chunked body over 1 MiB", raw("POST", "/v1/events", [json, ("Transfer-Encoding", "chunked")], body: chunked, length: false),
                .error(413, "payload_too_large"))
            let tenMB = bytes("{\"event_id\": \"") + [UInt8](repeating: UInt8(ascii: "a"), count: 10 * 1024 * 1024) + bytes("\"}")
            add("10 MB JSON string", postEvents(tenMB), .error(413, "payload_too_large"))

            // Routing.
            add("unknown path", raw("GET", "/nope"), .error(404, "not_found"))
            add("//healthz", raw("GET", "//healthz"), .error(404, "not_found"))
            add("/healthz/", raw("GET", "/healthz/"), .error(404, "not_found"))
            add("/V1/events (case)", raw("POST", "/V1/events", [json], body: small), .error(404, "not_found"))
            add("/v1/events/ (trailing slash)", raw("POST", "/v1/events/", [json], body: small), .error(404, "not_found"))
            add("empty session segment", raw("GET", "/v1/sessions//feed", [auth]), .error(404, "not_found"))
            add("unknown path beats wrong media type", raw("POST", "/v1/nothing", [("Content-Type", "text/plain")], body: small), .error(404, "not_found"))
            add("DELETE /v1/events", raw("DELETE", "/v1/events"), .error(405, "method_not_allowed"), check: allowContains(["POST"]))
            add("GET /v1/events", raw("GET", "/v1/events"), .error(405, "method_not_allowed"), check: allowContains(["POST"]))
            add("POST /healthz", raw("POST", "/healthz", [json], body: bytes("{}")), .error(405, "method_not_allowed"), check: allowContains(["GET"]))
            add("PATCH feed without a token: 405 before 401", raw("PATCH", "/v1/sessions/s/feed", [json], body: bytes("{}")),
                .error(405, "method_not_allowed"), check: allowContains(["GET", "PUT"]))
            add("/v1/sessions/../feed is session \"..\" (no feed)", getFeed(".."), .error(404, "not_found"))
            add("%2e%2e as a session is \"..\" (no feed)", getFeed("%2e%2e"), .error(404, "not_found"))

            // Admin token.
            let feed = "/v1/sessions/cat-session/feed"
            add("no Authorization", raw("GET", feed), .error(401, "unauthorized"), check: wwwAuthenticate)
            add("Bearer and nothing", raw("GET", feed, [("Authorization", "Bearer")]), .error(401, "unauthorized"), check: wwwAuthenticate)
            add("Bearer and a space", raw("GET", feed, [("Authorization", "Bearer ")]), .error(401, "unauthorized"), check: wwwAuthenticate)
            add("Basic xxx", raw("GET", feed, [("Authorization", "Basic eHh4")]), .error(401, "unauthorized"), check: wwwAuthenticate)
            add("Basic with the token", raw("GET", feed, [("Authorization", "Basic \(token)")]), .error(401, "unauthorized"))
            add("the token without a scheme", raw("GET", feed, [("Authorization", token)]), .error(401, "unauthorized"))
            add("token with one more character", raw("GET", feed, [("Authorization", "Bearer \(token)x")]), .error(401, "unauthorized"))
            add("token with one character less", raw("GET", feed, [("Authorization", "Bearer \(token.dropLast())")]), .error(401, "unauthorized"))
            add("token then a space and more", raw("GET", feed, [("Authorization", "Bearer \(token) x")]), .error(401, "unauthorized"))
            add("token in upper case", raw("GET", feed, [("Authorization", "Bearer \(token.uppercased())")]), .error(401, "unauthorized"))
            add("token with a Cyrillic е", raw("GET", feed, [("Authorization", "Bearer \(token.replacingOccurrences(of: "e", with: "е"))")]),
                .error(401, "unauthorized"))
            add("token in ?token=", raw("GET", feed + "?token=\(token)"), .error(401, "unauthorized"))
            add("token in ?access_token=", raw("GET", feed + "?access_token=\(token)"), .error(401, "unauthorized"))
            add("token in X-Admin-Token", raw("GET", feed, [("X-Admin-Token", token)]), .error(401, "unauthorized"))
            // RFC 9110: a field value has no trailing whitespace, and auth schemes are case-insensitive.
            // These pass auth and reach the handler: the session has no feed.
            add("token followed by trailing whitespace (OWS, not part of the value)", raw("GET", feed, [("Authorization", "Bearer \(token) ")]),
                .error(404, "not_found"))
            add("lowercase bearer scheme", raw("GET", feed, [("Authorization", "bearer \(token)")]), .error(404, "not_found"))
            add("uppercase BEARER scheme", raw("GET", feed, [("Authorization", "BEARER \(token)")]), .error(404, "not_found"))

            // Refusal order on PUT.
            add("no token, bad path, wrong media type: 401", raw("PUT", "/v1/sessions/bad%2Fid/feed", [("Content-Type", "text/plain")], body: snapshot()),
                .error(401, "unauthorized"))
            add("token, bad path, wrong media type: invalid_path", raw("PUT", "/v1/sessions/bad%2Fid/feed", [auth, ("Content-Type", "text/plain")], body: snapshot()),
                .error(400, "invalid_path", field: "session_id"))
            add("token, wrong media type, body over 1 MiB: 415", raw("PUT", "/v1/sessions/cat-snap-session/feed",
                                                                      [auth, ("Content-Type", "text/plain"), ("Content-Length", "\(2 * 1024 * 1024)")]),
                .error(415, "unsupported_media_type"))
            add("token, JSON, body over 1 MiB: 413", raw("PUT", "/v1/sessions/cat-snap-session/feed", [auth, json, ("Content-Length", "\(2 * 1024 * 1024)")]),
                .error(413, "payload_too_large"))
            add("no token, body over 1 MiB: 401", raw("PUT", "/v1/sessions/cat-snap-session/feed", [json, ("Content-Length", "\(2 * 1024 * 1024)")]),
                .error(401, "unauthorized"))
            add("events: wrong media type, body over 1 MiB: 415", raw("POST", "/v1/events", [("Content-Type", "text/plain"), ("Content-Length", "\(2 * 1024 * 1024)")]),
                .error(415, "unsupported_media_type"))

            // Identifiers in the path.
            add("SQL in the session path", getFeed("%27%20OR%201%3D1%20--"), .error(400, "invalid_path", field: "session_id"))
            add("SQL quotes in the session path, unescaped", getFeed("'OR'1'='1"), .error(400, "invalid_path", field: "session_id"))
            add("..%2F..%2Fetc as a session", getFeed("..%2F..%2Fetc"), .error(400, "invalid_path", field: "session_id"))
            add("%00 in a session", getFeed("a%00b"), .error(400, "invalid_path", field: "session_id"))
            add("%20 in a session", getFeed("a%20b"), .error(400, "invalid_path", field: "session_id"))
            add("Cyrillic а in a session", getFeed("sess-%D0%B0"), .error(400, "invalid_path", field: "session_id"))
            add("fullwidth ａ in a session", getFeed("sess-%EF%BD%81"), .error(400, "invalid_path", field: "session_id"))
            add("129-character session", getFeed(String(repeating: "s", count: 129)), .error(400, "invalid_path", field: "session_id"))
            add("128-character session is well-formed", getFeed(String(repeating: "s", count: 128)), .error(404, "not_found"))
            // `%ff` is well-formed percent-encoding (RFC 3986 pct-encoded); it decodes to a byte out of
            // identifier form, so API.md makes it `invalid_path`, after routing and auth, not `bad_request`.
            add("%ff (well-formed escape, not UTF-8) in a session", getFeed("sess-%ff"), .error(400, "invalid_path", field: "session_id"))
            add("%ff in a session without a token: 401 before invalid_path", raw("GET", "/v1/sessions/sess-%ff/feed"), .error(401, "unauthorized"))
            add("%ff in an unknown path: 404", raw("GET", "/nope-%ff"), .error(404, "not_found"))
            add("%C0%AF (overlong UTF-8) in a report ad_id", raw("GET", "/v1/reports/ads/ad-%C0%AF", [auth]), .error(400, "invalid_path", field: "ad_id"))
            add("%zz in a session", getFeed("sess-%zz"), badRequest)
            add("truncated % escape in a session", getFeed("sess-%f"), badRequest)
            add("Cyrillic а in a report ad_id", raw("GET", "/v1/reports/ads/%D0%B0d-1", [auth]), .error(400, "invalid_path", field: "ad_id"))
            add("%2F in a report ad_id", raw("GET", "/v1/reports/ads/ad%2F1", [auth]), .error(400, "invalid_path", field: "ad_id"))
            add("SQL in a report query", raw("GET", "/v1/reports/ads?from=%27%20OR%201%3D1%20--", [auth]), .error(400, "invalid_query", field: "from"))
            add("Cyrillic advertiser_id in a report query", raw("GET", "/v1/reports/ads?advertiser_id=%D0%B0cme", [auth]),
                .error(400, "invalid_query", field: "advertiser_id"))
            add("%zz in a query", raw("GET", "/v1/reports/ads?from=%zz", [auth]), badRequest)

            // Media type.
            add("POST without Content-Type", raw("POST", "/v1/events", body: small), .error(415, "unsupported_media_type"))
            add("POST text/plain", raw("POST", "/v1/events", [("Content-Type", "text/plain")], body: small), .error(415, "unsupported_media_type"))
            add("POST application/jsonx", raw("POST", "/v1/events", [("Content-Type", "application/jsonx")], body: small), .error(415, "unsupported_media_type"))
            add("POST charset latin1", raw("POST", "/v1/events", [("Content-Type", "application/json; charset=latin1")], body: small),
                .error(415, "unsupported_media_type"))
            add("POST form-urlencoded", raw("POST", "/v1/events", [("Content-Type", "application/x-www-form-urlencoded")], body: small),
                .error(415, "unsupported_media_type"))

            // JSON bodies.
            add("invalid UTF-8 in a JSON string", postEvents(bytes("{\"event_id\": \"") + [0xFF, 0xFE] + bytes("\"}")), .error(400, "malformed_json"))
            add("overlong UTF-8 (C0 AF) in a JSON string", postEvents(bytes("{\"session_id\": \"") + [0xC0, 0xAF] + bytes("\"}")), .error(400, "malformed_json"))
            add("encoded surrogate (ED A0 80) in a JSON string", postEvents(bytes("{\"ad_id\": \"") + [0xED, 0xA0, 0x80] + bytes("\"}")),
                .error(400, "malformed_json"))
            add("arrays nested 100,000 deep", postEvents([UInt8](repeating: UInt8(ascii: "["), count: 100_000) + [UInt8](repeating: UInt8(ascii: "]"), count: 100_000)),
                .error(400, "malformed_json"))
            add("objects nested 100,000 deep", postEvents(bytes(String(repeating: "{\"a\":", count: 100_000) + "1" + String(repeating: "}", count: 100_000))),
                .error(400, "malformed_json"))
            add("events nested 100,000 deep", postEvents(bytes("{\"events\": " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000) + "}")),
                .error(400, "malformed_json"))
            add("empty body", postEvents([]), .error(400, "malformed_json"))
            add("null", postEvents(bytes("null")), .error(400, "malformed_json"))
            add("a JSON array", postEvents(bytes("[\(event())]")), .error(400, "malformed_json"))
            add("a JSON string", postEvents(bytes("\"event\"")), .error(400, "malformed_json"))
            add("events is an object", postEvents(bytes("{\"events\": \(event())}")), .error(400, "malformed_json"))
            add("events is empty", postEvents(bytes("{\"events\": []}")), .error(400, "malformed_json"))
            add("501 events", postEvents(bytes("{\"events\": [" + Array(repeating: "{}", count: 501).joined(separator: ",") + "]}")), .error(400, "malformed_json"))
            add("trailing garbage", postEvents(bytes(event() + " x")), .error(400, "malformed_json"))
            add("truncated JSON", postEvents(bytes("{\"event_id\":")), .error(400, "malformed_json"))
            add("NaN", postEvents(bytes(event(["position": "NaN"]))), .error(400, "malformed_json"))
            add("single quotes", postEvents(bytes("{'event_id': 'x'}")), .error(400, "malformed_json"))
            add("a comment", postEvents(bytes("{/* x */}")), .error(400, "malformed_json"))
            add("raw control character in a string", postEvents(bytes("{\"ad_id\": \"a\u{01}b\"}")), .error(400, "malformed_json"))
            add("snapshot: invalid UTF-8", putFeed(bytes("{\"snapshot_id\": \"") + [0xFF] + bytes("\", \"ads\": []}")), .error(400, "malformed_json"))
            add("snapshot: nested 100,000 deep", putFeed([UInt8](repeating: UInt8(ascii: "["), count: 100_000) + [UInt8](repeating: UInt8(ascii: "]"), count: 100_000)),
                .error(400, "malformed_json"))
            add("snapshot: a JSON array", putFeed(bytes("[]")), .error(400, "malformed_json"))

            // Snapshots with hostile members (422, nothing registered).
            add("snapshot: position 1e400", putFeed(snapshot(["position": "1e400"])), .error(422, "invalid_snapshot", field: "ads[0].position"))
            add("snapshot: position -1", putFeed(snapshot(["position": "-1"])), .error(422, "invalid_snapshot", field: "ads[0].position"))
            add("snapshot: Cyrillic а in ad_id", putFeed(snapshot(["ad_id": "\"\u{0430}d-1\""])), .error(422, "invalid_snapshot", field: "ads[0].ad_id"))
            add("snapshot: SQL in snapshot_id", putFeed(snapshot(snapshotID: "\"' OR 1=1 --\"")), .error(422, "invalid_snapshot", field: "snapshot_id"))
            add("snapshot: javascript: url", putFeed(snapshot(["url": "\"javascript:alert(1)\""])), .error(422, "invalid_snapshot", field: "ads[0].url"))
            add("snapshot: Cyrillic host in url", putFeed(snapshot(["url": "\"https://\u{0430}cme.example/\""])), .error(422, "invalid_snapshot", field: "ads[0].url"))
            add("snapshot: user info in url", putFeed(snapshot(["url": "\"https://user:pw@acme.example/\""])), .error(422, "invalid_snapshot", field: "ads[0].url"))

            // Events with one hostile member: 200, rejected invalid_event, the right field.
            let cases: [(String, [String: String?], String?)] = [
                ("event_id a number", ["event_id": "123"], "event_id"),
                ("event_id not a UUID", ["event_id": "\"not-a-uuid\""], "event_id"),
                ("event_id in braces", ["event_id": "\"{5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e}\""], "event_id"),
                ("event_id SQL", ["event_id": "\"' OR 1=1 --\""], "event_id"),
                ("event_id null", ["event_id": "null"], "event_id"),
                ("type a number", ["type": "1"], "type"),
                ("type an array", ["type": "[\"impression\"]"], "type"),
                ("type unknown", ["type": "\"view\""], "type"),
                ("type in upper case", ["type": "\"IMPRESSION\""], "type"),
                ("session_id a number", ["session_id": "42"], "session_id"),
                ("session_id true", ["session_id": "true"], "session_id"),
                ("session_id an object (NoSQL)", ["session_id": "{\"$ne\": null}"], "session_id"),
                ("session_id SQL", ["session_id": "\"' OR 1=1 --\""], "session_id"),
                ("session_id empty", ["session_id": "\"\""], "session_id"),
                ("session_id 129 characters", ["session_id": "\"\(String(repeating: "s", count: 129))\""], "session_id"),
                ("session_id path traversal", ["session_id": "\"../../etc/passwd\""], "session_id"),
                ("ad_id Cyrillic а", ["ad_id": "\"\u{0430}d-1\""], "ad_id"),
                ("ad_id fullwidth", ["ad_id": "\"\u{FF41}\u{FF44}-1\""], "ad_id"),
                ("ad_id escaped NUL", ["ad_id": "\"ad\\u0000\""], "ad_id"),
                ("ad_id escaped newline", ["ad_id": "\"ad\\n\""], "ad_id"),
                ("ad_id zero-width joiner", ["ad_id": "\"ad\\u200d1\""], "ad_id"),
                ("ad_id array", ["ad_id": "[]"], "ad_id"),
                ("occurred_at a number", ["occurred_at": "1764424020"], "occurred_at"),
                ("occurred_at without an offset", ["occurred_at": "\"2026-11-29T13:47:00\""], "occurred_at"),
                ("occurred_at with a space", ["occurred_at": "\"2026-11-29 13:47:00Z\""], "occurred_at"),
                ("occurred_at out of range", ["occurred_at": "\"1970-01-01T00:00:00Z\""], "occurred_at"),
                ("occurred_at impossible date", ["occurred_at": "\"2026-13-45T99:99:99Z\""], "occurred_at"),
                ("snapshot_id a number", ["snapshot_id": "5"], "snapshot_id"),
                ("snapshot_id SQL", ["snapshot_id": "\"' OR 1=1 --\""], "snapshot_id"),
                ("position 1e400", ["position": "1e400"], "position"),
                ("position a string", ["position": "\"3\""], "position"),
                ("position 3.0", ["position": "3.0"], "position"),
                ("position -1", ["position": "-1"], "position"),
                ("position 2^31", ["position": "2147483648"], "position"),
                ("position of 23 digits", ["position": "99999999999999999999999"], "position"),
                ("visible_fraction a string", ["visible_fraction": "\"0.8\"", "visible_ms": "1200"], "visible_fraction"),
                ("visible_fraction 1.5", ["visible_fraction": "1.5", "visible_ms": "1200"], "visible_fraction"),
                ("visible_fraction -0.1", ["visible_fraction": "-0.1", "visible_ms": "1200"], "visible_fraction"),
                ("visible_fraction 1e400", ["visible_fraction": "1e400", "visible_ms": "1200"], "visible_fraction"),
                ("visible_ms 12.5", ["visible_fraction": "0.8", "visible_ms": "12.5"], "visible_ms"),
                ("visible_ms -1", ["visible_fraction": "0.8", "visible_ms": "-1"], "visible_ms"),
                ("visible_ms over a day", ["visible_fraction": "0.8", "visible_ms": "86400001"], "visible_ms"),
                ("visible_ms a string", ["visible_fraction": "0.8", "visible_ms": "\"1200\""], "visible_ms"),
                ("visible_fraction alone", ["visible_fraction": "0.8"], "visible_ms"),
                ("visible_ms alone", ["visible_ms": "1200"], "visible_fraction"),
                ("bad event_id and bad session_id: event_id first", ["event_id": "1", "session_id": "2"], "event_id"),
                ("bad type and bad position: type first", ["type": "\"x\"", "position": "-1"], "type"),
                ("missing occurred_at and bad snapshot_id: occurred_at first", ["occurred_at": nil, "snapshot_id": "7"], "occurred_at"),
            ]
            for (name, overrides, field) in cases {
                add("event: \(name)", postEvents(bytes(event(overrides))), .invalidEvent(field: field))
            }
            add("event: {}", postEvents(bytes("{}")), .invalidEvent(field: "event_id"))
            add("event: batch entry 42", postEvents(bytes("{\"events\": [42]}")), .invalidEvent(field: nil))

            // Controls: hostile-looking but valid HTTP that must still be served.
            add("exactly 100 header fields", raw("GET", "/healthz", (0..<99).map { ("X-F\($0)", "v") }), .success(200))
            add("obs-text (0xFF) in a header value is allowed", [UInt8]("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ".utf8) + [0xFF] + [UInt8]("\r\n\r\n".utf8),
                .success(200))
            add("equal repeated Content-Length", raw("POST", "/v1/events", [json, ("Content-Length", "2"), ("Content-Length", "2")], body: bytes("[]"), length: false),
                .error(400, "malformed_json"))
            return entries
        }

        /// The status codes after which API.md says the connection closes.
        static func closes(_ expected: Expected) -> Bool {
            switch expected {
            case .error(let status, _, _): [400, 408, 413, 414, 431, 505].contains(status)
            case .eitherError: true
            case .invalidEvent, .success: false
            }
        }

        /// The failures of one entry's exchange, empty when it got what the contract says.
        static func failures(_ entry: Entry, _ exchange: RawExchange) -> [String] {
            guard let response = exchange.response else {
                return ["no response (\(exchange.problem ?? "?")); received \(exchange.raw.count) bytes: \(String(decoding: exchange.raw.prefix(300), as: UTF8.self))"]
            }
            var problems: [String] = []
            let got = "\(response.status) \(response.text.prefix(300))"
            func expectError(_ status: Int, _ code: String, _ field: String?) {
                if response.status != status || response.errorCode != code { problems.append("expected \(status) \(code), got \(got)") }
                if let field, response.errorField != field { problems.append("expected field \(field), got \(response.errorField ?? "none")") }
                if response.errorMessage?.isEmpty != false { problems.append("no error message") }
                if response.header("Content-Type")?.lowercased().hasPrefix("application/json") != true { problems.append("Content-Type \(response.header("Content-Type") ?? "missing")") }
            }
            switch entry.expected {
            case .error(let status, let code, let field):
                expectError(status, code, field)
            case .eitherError(let a, let b):
                if !((response.status == a.0 && response.errorCode == a.1) || (response.status == b.0 && response.errorCode == b.1)) {
                    problems.append("expected \(a) or \(b), got \(got)")
                }
            case .invalidEvent(let field):
                let object = response.json ?? [:]
                let results = object["results"] as? [[String: Any]] ?? []
                if response.status != 200 || object["accepted"] as? Int != 0 || object["rejected"] as? Int != 1 || results.count != 1 {
                    problems.append("expected 200 with one rejected event, got \(got)")
                } else {
                    let result = results[0]
                    if result["status"] as? String != "rejected" || result["reason"] as? String != "invalid_event" {
                        problems.append("expected rejected invalid_event, got \(got)")
                    }
                    if result["field"] as? String != field { problems.append("expected field \(field ?? "none"), got \(got)") }
                    // Section 2: a rule-1 rejection says what is wrong, about its field when it has one.
                    let message = result["message"] as? String ?? ""
                    if message.isEmpty || !message.hasPrefix(field.map { $0 + " " } ?? "") {
                        problems.append("expected a message about \(field ?? "the entry"), got \(got)")
                    }
                }
            case .success(let status):
                if response.status != status { problems.append("expected \(status), got \(got)") }
            }
            if closes(entry.expected) {
                if response.header("Connection")?.lowercased().contains("close") != true { problems.append("no Connection: close (\(response.header("Connection") ?? "missing"))") }
                if !exchange.closed { problems.append("connection left open after \(response.status)") }
            }
            if response.header("Date") == nil { problems.append("no Date header") }
            if response.header("Content-Length") == nil { problems.append("no Content-Length header") }
            if let check = entry.check, let problem = check(response) { problems.append(problem) }
            return problems
        }

        @Test func catalogueOverTheNetwork() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }

            let entries = Self.catalogue()
            #expect(entries.count >= 80, "the catalogue has \(entries.count) entries")
            #expect(Set(entries.map(\.name)).count == entries.count, "entry names are unique")
            var failed: [String] = []
            for entry in entries {
                let exchange = try RawClient.exchange(port: server.port, entry.bytes, waitForClose: Self.closes(entry.expected) ? 3 : 0)
                let problems = Self.failures(entry, exchange)
                if let defect = entry.knownDefect {
                    withKnownIssue(Comment(rawValue: defect)) {
                        #expect(problems.isEmpty, "\(entry.name): \(problems.joined(separator: "; "))")
                    }
                } else if !problems.isEmpty {
                    failed.append("\(entry.name): \(problems.joined(separator: "; "))")
                }
            }
            #expect(failed.isEmpty, "\(failed.count) of \(entries.count) catalogue entries failed:\n\(failed.joined(separator: "\n"))")
            print("hostile input catalogue: \(entries.count) entries, \(failed.count) failed")

            // The server is still healthy and a normal client still gets served.
            let health = try server.request("GET", "/healthz")
            #expect(health.status == 200, "\(health.text)")
            let put = try server.putFeed("after-catalogue", snapshot: "after-snap", ads: [Body.ad("after-ad", 2, "acme")])
            #expect(put.status == 201, "\(put.text)")
            let impression = try server.postEvents(Body.event("impression", session: "after-catalogue", ad: "after-ad", snapshot: "after-snap", position: 2))
            #expect(impression.status == 200, "\(impression.text)")
            let answer = try EventsAnswer(impression)
            #expect(answer.statuses == ["accepted"], "\(impression.text)")

            // No catalogue request stored an event: the database holds exactly the one above.
            #expect(try Psql.value("SELECT count(*) FROM events", server.databaseURL) == "1")
            #expect(try Psql.value("SELECT string_agg(session_id || '/' || ad_id, ',') FROM events", server.databaseURL) == "after-catalogue/after-ad")
            // And no snapshot from the catalogue was registered.
            #expect(try Psql.value("SELECT count(*) FROM snapshots", server.databaseURL) == "1")
            #expect(server.stop() == 0)
        }
    }
}
