import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension EndToEnd {
    /// API.md section 6 (limits per client) and "Who calls what" (scoped tokens), against the real
    /// binary: each limit at its boundary, the client address behind a trusted proxy, scopes and
    /// rotation.
    @Suite(.timeLimit(.minutes(5))) struct Limits {
        static let adminToken = ServerProcess.adminToken
        static let feedToken = "e2e-feed-token-0123456789"
        static let reportToken = "e2e-report-token-0123456789"

        static func bearer(_ token: String) -> (String, String) { ("Authorization", "Bearer \(token)") }

        /// The samples of `/metrics`.
        static func metrics(_ server: ServerProcess) throws -> [String: Double] {
            try Operations.parsePrometheus(try server.request("GET", "/metrics").text)
        }

        /// The server's log lines (JSON objects) whose `msg` starts with `prefix`.
        static func logLines(_ server: ServerProcess, _ prefix: String) -> [[String: Any]] {
            server.child.stdout.text.split(separator: "\n").compactMap { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      (object["msg"] as? String)?.hasPrefix(prefix) == true else { return nil }
                return object
            }
        }

        /// A 429 as section 6 writes it: the error body, `Retry-After` in whole seconds (at least
        /// 1), and the connection closed.
        static func expectRateLimited(_ response: HTTPResponse, maxRetryAfter: Int = 86_400, _ comment: Comment? = nil,
                                      sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(response.status == 429, comment, sourceLocation: sourceLocation)
            #expect(response.errorCode == "rate_limited", comment, sourceLocation: sourceLocation)
            let retryAfter = response.header("Retry-After").flatMap(Int.init) ?? 0
            #expect(retryAfter >= 1 && retryAfter <= maxRetryAfter, "Retry-After \(response.header("Retry-After") ?? "none")",
                    sourceLocation: sourceLocation)
            #expect(response.header("Connection") == "close", comment, sourceLocation: sourceLocation)
        }

        /// A bucket of 5 events refilled at 1 a second: a batch of 5 empties it; the next request
        /// is refused from its head (before its body is read); a batch larger than what the bucket
        /// holds is refused once its body is read, with nothing stored and nothing charged.
        @Test func theEventsBucketAtItsBoundary() throws {
            let server = try ServerProcess.start(extra: ["ADTALLY_CLIENT_EVENTS_PER_SECOND": "1", "ADTALLY_CLIENT_EVENT_BURST": "5"])
            defer { server.kill() }
            let batch = (0..<5).map { _ in Body.event("impression", session: "limits-s", ad: "limits-ad") }
            #expect(try server.postEvents(["events": batch]).status == 200)
            // Empty (a refill of one a second): within a few requests one is refused, and from its
            // head: with `Expect: 100-continue` it is answered 429 instead of 100, its body never sent.
            var refused: RawExchange?
            for _ in 0..<5 {
                let exchange = try RawClient.exchange(port: server.port, Array((
                    "POST /v1/events HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
                    + "Expect: 100-continue\r\n\r\n").utf8), timeout: 10)
                if exchange.response?.status == 429 {
                    refused = exchange
                    break
                }
            }
            let head = try #require(refused?.response, "no request was refused with an empty bucket")
            Self.expectRateLimited(head, maxRetryAfter: 1)
            #expect(refused?.closed == true)
            // Three seconds refill three events (and what was left, under one): a batch of 5 does
            // not fit once its body says so. Nothing of it is stored, and nothing is charged: what
            // the bucket held is there for a batch of 3.
            Thread.sleep(forTimeInterval: 3.2)
            let ids = (0..<5).map { _ in UUID().uuidString.lowercased() }
            let tooMany = try server.postEvents(["events": ids.map { Body.event("impression", session: "limits-s", ad: "y", id: $0) }])
            Self.expectRateLimited(tooMany, maxRetryAfter: 2)
            let list = ids.map { "'\($0)'" }.joined(separator: ",")
            #expect(try Psql.value("SELECT count(*) FROM events WHERE event_id::text IN (\(list))", server.databaseURL) == "0")
            let three = try server.postEvents(["events": (0..<3).map { _ in Body.event("impression", session: "limits-s", ad: "z") }])
            #expect(three.status == 200, "\(three.status) \(three.text)")
            // Never limited: the probes.
            for path in ["/healthz", "/metrics"] { #expect(try server.request("GET", path).status == 200) }
            let samples = try Self.metrics(server)
            #expect(samples[#"adtally_http_rate_limited_total{limit="events"}"#] == 2)
            #expect(samples[#"adtally_http_rate_limited_total{limit="connections"}"#] == 0)
            #expect(samples[#"adtally_http_rate_limited_total{limit="auth"}"#] == 0)
            // One warning per address and minute, never one per refusal.
            #expect(server.stop() == 0)
            let warnings = Self.logLines(server, "client over a limit")
            #expect((1...2).contains(warnings.count), "\(warnings)")
            #expect(warnings.first?["client"] as? String == "127.0.0.1" && warnings.first?["limit"] as? String == "events")
        }

        /// A body of 8 KiB or more, from a client whose bucket may not hold a full batch, is priced
        /// by a scan before its events are decoded; its answers are the ones the decode gives. A
        /// padded batch that fits is stored whole; one that does not is refused with nothing stored
        /// and nothing charged; a padded body that is not JSON, or a batch of 501, is the decode's
        /// 400 (costing its head only). What is left in the bucket afterwards proves the charges.
        @Test func largeBodiesArePricedBeforeTheyAreDecoded() throws {
            let server = try ServerProcess.start(extra: ["ADTALLY_CLIENT_EVENTS_PER_SECOND": "1", "ADTALLY_CLIENT_EVENT_BURST": "30"])
            defer { server.kill() }
            let padding = Data(repeating: UInt8(ascii: " "), count: 9000)
            func post(_ body: Data) throws -> HTTPResponse {
                try server.request("POST", "/v1/events", headers: [Body.jsonType], body: body + padding)
            }
            func batch(_ ids: [String]) -> Data {
                Body.json(["events": ids.map { Body.event("impression", session: "price-s", ad: "price-ad", id: $0) }])
            }
            func stored(_ ids: [String]) throws -> String? {
                let list = ids.map { "'\($0)'" }.joined(separator: ",")
                return try Psql.value("SELECT count(*) FROM events WHERE event_id::text IN (\(list))", server.databaseURL)
            }
            let ids = { (n: Int) in (0..<n).map { _ in UUID().uuidString.lowercased() } }
            // 30 in the bucket: 12 fit (1 by the head, 11 by the body).
            let first = ids(12)
            let fits = try post(batch(first))
            #expect(fits.status == 200, "\(fits.status) \(fits.text)")
            #expect(try stored(first) == "12")
            // 18 left: 25 do not fit, and nothing of them is stored.
            let second = ids(25)
            Self.expectRateLimited(try post(batch(second)), maxRetryAfter: 8)
            #expect(try stored(second) == "0")
            // Not JSON, and too many events: 400 from the decode, not 429.
            let broken = try post(Data(#"{"events": [{"event_id": "#.utf8))
            #expect(broken.status == 400 && broken.errorCode == "malformed_json", "\(broken.status) \(broken.text)")
            let tooLong = try post(batch(ids(501)))
            #expect(tooLong.status == 400 && tooLong.errorCode == "malformed_json", "\(tooLong.status) \(tooLong.text)")
            // The refused batch gave its head back, the two 400s took their heads only: 16 and what
            // refilled are left, so 16 fit.
            let last = ids(16)
            let fitsStill = try post(batch(last))
            #expect(fitsStill.status == 200, "refused, broken or oversized bodies were charged more than their heads: \(fitsStill.status) \(fitsStill.text)")
            #expect(try stored(last) == "16")
            #expect(try Self.metrics(server)[#"adtally_http_rate_limited_total{limit="events"}"#] == 1)
        }

        /// Three connections per address: the fourth is answered 429 and closed on its first
        /// request, unless it asks for a probe; another address, and a trusted proxy, are not limited.
        @Test func theConnectionCapAtItsBoundary() throws {
            let server = try ServerProcess.start(extra: ["ADTALLY_CLIENT_MAX_CONNECTIONS": "3", "ADTALLY_TRUSTED_PROXIES": "127.0.0.4"])
            defer { server.kill() }
            let held = try (0..<3).map { _ in try KeptAliveConnection(port: server.port) }
            for connection in held { #expect(try connection.request("GET", "/v1/reports/ads/cap-ad", headers: [Body.auth]).status == 200) }
            let fourth = try KeptAliveConnection(port: server.port)
            let refused = try fourth.request("POST", "/v1/events", headers: [Body.jsonType],
                                             body: Body.json(Body.event("impression", session: "cap-s", ad: "cap-ad")))
            Self.expectRateLimited(refused, maxRetryAfter: 1)
            #expect(fourth.isClosedByServer())
            let probe = try KeptAliveConnection(port: server.port)
            let ready = try probe.request("GET", "/readyz")
            #expect(ready.status == 200)
            #expect(ready.header("Connection") == "close")
            // The connections under the cap go on being served.
            for connection in held { #expect(try connection.request("GET", "/healthz").status == 200) }
            for source in ["127.0.0.2", "127.0.0.4"] {
                // Each opened and asked at once (kept open): an over-cap connection has 1 s for its
                // head, which three earlier requests on a loaded machine could use up.
                var others: [KeptAliveConnection] = []
                let statuses = try (0..<4).map { _ in
                    let connection = try KeptAliveConnection(port: server.port, from: source)
                    others.append(connection)
                    return try connection.request("GET", "/v1/reports/ads/cap-ad", headers: [Body.auth]).status
                }
                #expect(others.count == 4)
                #expect(statuses == (source == "127.0.0.4" ? [200, 200, 200, 200] : [200, 200, 200, 429]), "\(source)")
            }
            #expect(try Self.metrics(server)[#"adtally_http_rate_limited_total{limit="connections"}"#] == 2)
        }

        /// API.md "Who calls what": 20 refused tokens a minute are allowed, the 21st is still a
        /// 401, and from then on every admin request of that UTC minute is 429, the right token
        /// too, with Retry-After the seconds left in the minute; other addresses are not affected.
        @Test func twentyOneBadTokensThenTheRightOne() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }
            // The 22 requests must fall in one UTC minute: start at the top of one if it is late.
            let second = Int(Date().timeIntervalSince1970) % 60
            if second > 45 { Thread.sleep(forTimeInterval: Double(61 - second)) }
            let connection = { try KeptAliveConnection(port: server.port) }
            for attempt in 1...21 {
                let wrong = try connection().request("GET", "/v1/reports/ads/auth-ad", headers: [Self.bearer("wrong-token-\(attempt)-0000")])
                #expect(wrong.status == 401, "attempt \(attempt): \(wrong.status)")
                #expect(wrong.header("WWW-Authenticate") == "Bearer")
            }
            let right = try connection().request("GET", "/v1/reports/ads/cap-ad", headers: [Body.auth])
            let left = 60 - Int(Date().timeIntervalSince1970) % 60
            Self.expectRateLimited(right, maxRetryAfter: 60)
            let retryAfter = right.header("Retry-After").flatMap(Int.init) ?? 0
            #expect(abs(retryAfter - left) <= 2, "Retry-After \(retryAfter), \(left) s left in the minute")
            // Events are not admin requests; another address is not throttled.
            #expect(try server.postEvents(Body.event("impression", session: "auth-s", ad: "auth-ad")).status == 200)
            let elsewhere = try KeptAliveConnection(port: server.port, from: "127.0.0.2")
            #expect(try elsewhere.request("GET", "/v1/reports/ads/cap-ad", headers: [Body.auth]).status == 200)
            #expect(try Self.metrics(server)[#"adtally_http_rate_limited_total{limit="auth"}"#] == 1)
            // (That the next minute starts clean is ClientLimitsTests', on a clock it moves.)
        }

        /// `ADTALLY_FEED_TOKENS`, `ADTALLY_REPORT_TOKENS` and `ADTALLY_ADMIN_TOKEN` (two of them, as
        /// in a rotation): each scope where it belongs, `403 forbidden` elsewhere, before the path
        /// is checked.
        @Test func tokensByScopeAndRotation() throws {
            let newAdmin = "e2e-admin-token-rotated-0001"
            let server = try ServerProcess.start(adminToken: "\(Self.adminToken), \(newAdmin)", extra: [
                "ADTALLY_FEED_TOKENS": Self.feedToken, "ADTALLY_REPORT_TOKENS": Self.reportToken,
            ])
            defer { server.kill() }
            let snapshot = ["snapshot_id": "scope-f-1", "ads": [Body.ad("scope-ad", 1, "scope-adv")]] as [String: Any]
            func put(_ token: String, _ session: String = "scope-s") throws -> HTTPResponse {
                try server.request("PUT", "/v1/sessions/\(session)/feed", headers: [Body.jsonType, Self.bearer(token)], body: Body.json(snapshot))
            }
            func get(_ path: String, _ token: String) throws -> HTTPResponse {
                try server.request("GET", path, headers: [Self.bearer(token)])
            }
            // feed: register and read feeds, no reports.
            #expect(try put(Self.feedToken).status == 201)
            #expect(try get("/v1/sessions/scope-s/feed", Self.feedToken).status == 200)
            let noReports = try get("/v1/reports/ads", Self.feedToken)
            #expect(noReports.status == 403 && noReports.errorCode == "forbidden", "\(noReports.text)")
            #expect(try get("/v1/reports/ads/scope-ad", Self.feedToken).status == 403)
            // reports: reports and reading feeds, no registration (403 before the path's 400).
            let noRegistration = try put(Self.reportToken)
            #expect(noRegistration.status == 403 && noRegistration.errorCode == "forbidden", "\(noRegistration.text)")
            #expect(try put(Self.reportToken, "bad%2Fsession").status == 403)
            #expect(try put(Self.feedToken, "bad%2Fsession").status == 400)
            #expect(try get("/v1/sessions/scope-s/feed", Self.reportToken).status == 200)
            #expect(try get("/v1/reports/ads", Self.reportToken).status == 200)
            #expect(try get("/v1/reports/ads/scope-ad", Self.reportToken).status == 200)
            // admin: every scope, old and new token alike while both are listed.
            for token in [Self.adminToken, newAdmin] {
                #expect(try put(token).status == 200)
                #expect(try get("/v1/sessions/scope-s/feed", token).status == 200)
                #expect(try get("/v1/reports/ads", token).status == 200)
            }
            // Unknown, malformed or from the query string: 401 with WWW-Authenticate.
            for headers in [[Self.bearer("unknown-token-00000000")], [("Authorization", "Basic \(Self.adminToken)")], []] {
                let refused = try server.request("GET", "/v1/reports/ads?access_token=\(Self.adminToken)", headers: headers)
                #expect(refused.status == 401 && refused.header("WWW-Authenticate") == "Bearer", "\(headers)")
            }
            #expect(server.stop() == 0)
            let everything = server.child.stdout.text + server.child.stderr.text
            for token in [Self.feedToken, Self.reportToken, newAdmin] { #expect(!everything.contains(token), "a token was logged") }
        }

        /// A token under 12 characters, or one in two variables, stops the start with one line
        /// naming the variable (and not the token).
        @Test(arguments: [
            (["ADTALLY_ADMIN_TOKEN": "change-me"], "ADTALLY_ADMIN_TOKEN"),
            (["ADTALLY_FEED_TOKENS": "feed-token-000001,tiny"], "ADTALLY_FEED_TOKENS"),
            (["ADTALLY_ADMIN_TOKEN": "same-token-000001", "ADTALLY_REPORT_TOKENS": "same-token-000001"], "ADTALLY_REPORT_TOKENS"),
        ])
        func badTokensStopTheStart(_ variables: [String: String], _ named: String) throws {
            var environment = variables
            environment["DATABASE_URL"] = try TestDatabase.serverConnectionString()
            environment["ADTALLY_MIGRATIONS_DIR"] = Paths.migrationsDirectory.path
            let run = try ChildProcess.run(["serve"], environment: ChildProcess.environment(environment))
            #expect(run.status != nil && run.status != 0)
            let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: true)
            #expect(lines.count == 1, "\(run.stderr)")
            #expect(lines.first?.hasPrefix("adtally: configuration: \(named) ") == true, "\(run.stderr)")
            for token in variables.values { #expect(!run.stderr.contains(token), "the token is in the error line") }
        }

        /// "The client address": behind a trusted proxy the limits key on the address the proxy
        /// names; a header from an untrusted peer is ignored.
        @Test func theClientAddressWithTrustedProxies() throws {
            let server = try ServerProcess.start(extra: [
                "ADTALLY_TRUSTED_PROXIES": "127.0.0.1", "ADTALLY_CLIENT_EVENTS_PER_SECOND": "1", "ADTALLY_CLIENT_EVENT_BURST": "2",
            ])
            defer { server.kill() }
            func post(_ forwarded: String?, from source: String = "127.0.0.1") throws -> Int {
                var headers = [Body.jsonType]
                if let forwarded { headers.append(("X-Forwarded-For", forwarded)) }
                return try KeptAliveConnection(port: server.port, from: source).request(
                    "POST", "/v1/events", headers: headers, body: Body.json(Body.event("impression", session: "xff-s", ad: "xff-ad"))).status
            }
            // 198.51.100.1 behind the proxy: two events, then refused; its neighbour has a bucket
            // of its own, and so has the client of a chain whose right-most untrusted entry it is.
            let first = try (0..<4).map { _ in try post("198.51.100.1") }
            #expect(first.prefix(2) == [200, 200] && first.contains(429), "\(first)")
            #expect(try post("198.51.100.2") == 200)
            #expect(try post("203.0.113.9, 198.51.100.3, 127.0.0.1") == 200)
            // An untrusted peer's header is ignored: 127.0.0.2 is the client, whatever it claims.
            let untrusted = try (0..<4).map { index in try post("198.51.100.\(50 + index)", from: "127.0.0.2") }
            #expect(untrusted.prefix(2) == [200, 200] && untrusted.contains(429), "\(untrusted)")
            #expect(server.stop() == 0)
            let clients = Set(Self.logLines(server, "client over a limit").compactMap { $0["client"] as? String })
            #expect(clients == ["198.51.100.1", "127.0.0.2"], "\(clients)")
        }

        /// API.md section 6: when the server runs out of file descriptors it stops accepting for a
        /// moment, keeps serving the connections it has, does not spin (its CPU stays low, one log
        /// line a second at most) and accepts again once connections close.
        @Test func outOfFileDescriptorsItPausesAcceptingAndRecovers() throws {
            let prlimit = URL(fileURLWithPath: "/usr/bin/prlimit")
            guard FileManager.default.isExecutableFile(atPath: prlimit.path) else {
                Issue.record("prlimit (util-linux) is not installed")
                return
            }
            let database = try TestDatabase.create(prefix: "e2e").connectionString
            let child = try ChildProcess(executable: prlimit, arguments: ["--nofile=64:64", Paths.binary.path, "serve"],
                                         environment: ChildProcess.environment([
                                            "DATABASE_URL": database, "HOST": "127.0.0.1", "PORT": "0", "LOG_LEVEL": "info",
                                            "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path, "ADTALLY_ADMIN_TOKEN": Self.adminToken,
                                            "ADTALLY_DB_POOL_SIZE": "2", "ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "0",
                                            "ADTALLY_CLIENT_MAX_CONNECTIONS": "0",
                                         ]))
            defer { child.killAndReap() }
            let port = try #require(child.stdout.wait(until: Date() + 30) { text in
                text.split(separator: "\n").lazy.compactMap(ServerProcess.listeningPort).first
            }, "no listening line: \(child.stderr.text.suffix(500))")
            let pid = child.process.processIdentifier
            // The limit the server found and kept (hard = soft = 64), logged at start.
            let limitLine = child.stdout.text.split(separator: "\n").first { $0.contains("\"open-file limit\"") }
            #expect(limitLine?.contains("\"soft\":64") == true && limitLine?.contains("\"hard\":64") == true, "\(limitLine ?? "none")")
            // A connection opened first, with the pool's connections made, goes on being served.
            let kept = try KeptAliveConnection(port: port)
            let event = { Body.json(Body.event("impression", session: "emfile-s", ad: "emfile-ad")) }
            #expect(try kept.request("POST", "/v1/events", headers: [Body.jsonType], body: event()).status == 200)
            // More connections than descriptors: the kernel completes them into the backlog.
            var flood: [Int32] = []
            defer { flood.forEach { close($0) } }
            for _ in 0..<120 { if let fd = try? Loopback.connect(port: port) { flood.append(fd) } }
            Thread.sleep(forTimeInterval: 1)
            let cpuBefore = try Self.cpuSeconds(pid)
            let started = Date()
            for _ in 0..<10 {
                #expect(try kept.request("GET", "/healthz").status == 200)
                #expect(try kept.request("POST", "/v1/events", headers: [Body.jsonType], body: event()).status == 200)
                Thread.sleep(forTimeInterval: 0.3)
            }
            let busy = (try Self.cpuSeconds(pid) - cpuBefore) / Date().timeIntervalSince(started)
            #expect(busy < 0.25, "the server used \(Int(busy * 100))% of a core while out of descriptors")
            let pauses = child.stdout.text.split(separator: "\n").filter { $0.contains("out of file descriptors") }.count
            #expect(pauses >= 1 && Double(pauses) <= Date().timeIntervalSince(started) + 3, "\(pauses) lines")
            // The flood closes: new connections are served again.
            flood.forEach { close($0) }
            flood = []
            let recovered = TestSupport.poll(seconds: 15) { () -> Int? in
                (try? HTTPClient.request(port: port, method: "GET", path: "/healthz", timeout: 2))?.status == 200 ? 200 : nil
            }
            #expect(recovered == 200, "no new connection was served after the flood closed")
            let samples = try Operations.parsePrometheus(try HTTPClient.request(port: port, method: "GET", path: "/metrics").text)
            #expect((samples["adtally_http_accept_pauses_total"] ?? 0) >= 1)
        }

        /// User and system CPU seconds of a process, from `/proc/PID/stat`.
        static func cpuSeconds(_ pid: Int32) throws -> Double {
            let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
            let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
            // After the command: state is field 3 of the whole line, utime 14 and stime 15.
            let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
            return (Double(fields[11]) ?? 0) / ticks + (Double(fields[12]) ?? 0) / ticks
        }

        /// A pool of 2: one connection is the committer's. A flood of `/readyz` and of feed reads
        /// (both public or scoped work on the shared connection) never makes events wait out the
        /// pool: every event is answered 200, none near the 2 s a borrower waits.
        @Test func theCommittersConnectionUnderAReadinessFlood() throws {
            let server = try ServerProcess.start(extra: [
                "ADTALLY_DB_POOL_SIZE": "2", "ADTALLY_REPORT_TOKENS": Self.reportToken, "ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "0",
            ])
            defer { server.kill() }
            #expect(try server.putFeed("flood-s", snapshot: "flood-f", ads: [Body.ad("flood-ad", 1, "flood-adv")]).status == 201)
            let stop = DispatchSemaphore(value: 0)
            let flooders = DispatchGroup()
            let floods = 24
            for index in 0..<floods {
                flooders.enter()
                Thread {
                    defer { flooders.leave() }
                    let path = index % 3 == 0 ? "/v1/sessions/flood-s/feed" : "/readyz"
                    while stop.wait(timeout: .now()) == .timedOut {
                        _ = try? HTTPClient.request(port: server.port, method: "GET", path: path,
                                                    headers: [Self.bearer(Self.reportToken)], timeout: 10)
                    }
                }.start()
            }
            Thread.sleep(forTimeInterval: 0.5)
            var statuses: [Int] = []
            var slowest = 0.0
            let until = Date() + 5
            while Date() < until {
                let started = Date()
                statuses.append(try server.postEvents(Body.event("impression", session: "flood-s", ad: "flood-ad")).status)
                slowest = max(slowest, Date().timeIntervalSince(started))
            }
            for _ in 0..<floods { stop.signal() }
            _ = flooders.wait(timeout: .now() + 30)
            #expect(!statuses.isEmpty && statuses.allSatisfy { $0 == 200 }, "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))")
            #expect(slowest < 1.5, "an event waited \(slowest) s")
        }
    }
}
