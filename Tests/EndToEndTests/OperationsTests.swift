import Foundation
import TestSupport
import Testing

extension EndToEnd {
    /// API.md section 4 and the operator's view (issue: container, health, metrics, logs).
    @Suite(.timeLimit(.minutes(5))) struct Operations {
        /// Polls `probe` until it returns a value or `seconds` pass; nil on time-out.
        static func poll<T>(seconds: Double, _ probe: () -> T?) -> T? {
            TestSupport.poll(seconds: seconds, probe)
        }

        @Test func readinessFollowsTheDatabase() throws {
            let cluster = try DisposableCluster()
            let server = try ServerProcess.start(databaseURL: cluster.connectionString)
            defer { server.kill() }
            #expect(try server.request("GET", "/readyz").status == 200)

            try cluster.stop()
            let notReady = Self.poll(seconds: 15) { () -> HTTPResponse? in
                guard let response = try? server.request("GET", "/readyz"), response.status == 503 else { return nil }
                return response
            }
            let down = try #require(notReady, "/readyz never answered 503 with the database stopped")
            #expect(down.json?["status"] as? String == "not_ready")
            #expect((down.json?["reason"] as? String)?.isEmpty == false)
            // Liveness does not depend on the database.
            #expect(try server.request("GET", "/healthz").status == 200)
            // An endpoint that needs the database answers 503 with Retry-After, not 500.
            let refused = try server.postEvents(Body.event("impression", session: "s", ad: "a"))
            #expect(refused.status == 503, "\(refused.text)")
            #expect(refused.errorCode == "unavailable")
            #expect(Int(refused.header("Retry-After") ?? "") != nil)

            try cluster.start()
            let back = Self.poll(seconds: 15) { () -> Int? in
                (try? server.request("GET", "/readyz"))?.status == 200 ? 200 : nil
            }
            #expect(back == 200, "/readyz did not recover after the database came back")
            let answered = try server.postEvents(Body.event("impression", session: "s", ad: "a"))
            #expect(answered.status == 200, "\(answered.text)")
            #expect(server.stop() == 0)
        }

        @Test func metricsCountAKnownSequence() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }
            for _ in 0..<3 { _ = try server.request("GET", "/healthz") }
            _ = try server.request("GET", "/no/such/path")
            let put = try server.putFeed("m-1", snapshot: "f-1", ads: [Body.ad("ad-m", 1, "acme")])
            #expect(put.status == 201)
            let batch: [String: Any] = ["events": [
                Body.event("impression", session: "m-1", ad: "ad-m"),
                Body.event("impression", session: "m-1", ad: "ad-m"),
                Body.event("click", session: "m-1", ad: "ad-gone"),
                ["type": "click"],
            ]]
            #expect(try server.postEvents(batch).status == 200)

            let response = try server.request("GET", "/metrics")
            #expect(response.status == 200)
            #expect(response.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let samples = try Self.parsePrometheus(response.text)
            #expect(samples[#"adtally_http_requests_total{route="/healthz",method="GET",status="200"}"#] == 3)
            #expect(samples[#"adtally_http_requests_total{route="unmatched",method="GET",status="404"}"#] == 1)
            #expect(samples[#"adtally_http_requests_total{route="/v1/sessions/{session_id}/feed",method="PUT",status="201"}"#] == 1)
            #expect(samples[#"adtally_http_requests_total{route="/v1/events",method="POST",status="200"}"#] == 1)
            #expect(samples[#"adtally_events_total{type="impression",outcome="accepted",reason=""}"#] == 1)
            #expect(samples[#"adtally_events_total{type="impression",outcome="duplicate",reason="impression_already_counted"}"#] == 1)
            #expect(samples[#"adtally_events_total{type="click",outcome="rejected",reason="ad_not_in_feed"}"#] == 1)
            #expect(samples[#"adtally_events_total{type="click",outcome="rejected",reason="invalid_event"}"#] == 1)
            #expect(samples[#"adtally_http_request_duration_seconds_count{route="/healthz"}"#] == 3)
            #expect(samples[#"adtally_http_request_duration_seconds_bucket{route="/healthz",le="+Inf"}"#] == 3)
            #expect((samples["adtally_http_connections_open"] ?? 0) >= 1)
            #expect(samples["adtally_db_pool_connections"] != nil)
            #expect(samples["adtally_db_pool_connections_in_use"] == 0)
        }

        /// The series every Prometheus user expects beside AdTally's own: the process_* set of
        /// the client libraries and adtally_build_info, whose version is the one --version prints.
        @Test func metricsFollowPrometheusConventions() throws {
            let before = Date().timeIntervalSince1970
            let server = try ServerProcess.start()
            defer { server.kill() }
            let samples = try Self.parsePrometheus(try server.request("GET", "/metrics").text)
            let version = try ChildProcess.run(["--version"], environment: ChildProcess.environment([:]))
            #expect(version.status == 0)
            let printed = version.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(printed.hasPrefix("adtally "), "\(printed)")
            let label = String(printed.dropFirst("adtally ".count))
            #expect(!label.isEmpty)
            #expect(samples["adtally_build_info{version=\"\(label)\"}"] == 1, "\(samples.keys.filter { $0.hasPrefix("adtally_build") })")
            // Started by this test: at or after `before` (the kernel counts in clock ticks, the
            // boot time in whole seconds), and not after now.
            let started = try #require(samples["process_start_time_seconds"])
            #expect(started >= before - 1 && started <= Date().timeIntervalSince1970 + 1, "\(started) vs \(before)")
            #expect((samples["process_resident_memory_bytes"] ?? 0) > 1_048_576)
            #expect((samples["process_open_fds"] ?? 0) >= 4, "stdin, stdout, stderr and the listener at least")
            #expect((samples["process_cpu_seconds_total"] ?? -1) >= 0)
            #expect(server.stop() == 0)
        }

        @Test func logsAreOneJSONObjectPerLineWithoutSecrets() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }
            _ = try server.request("GET", "/healthz", headers: [("X-Request-Id", "req-abc-123")])
            _ = try server.request("GET", "/v1/sessions/secret-session-in-a-path/feed", headers: [Body.auth])
            let missing = try server.request("GET", "/v1/sessions/x/feed?token=\(ServerProcess.adminToken)", headers: [Body.auth])
            let unauthorized = try server.request("GET", "/v1/reports/ads", headers: [("X-Request-Id", "req-no-token")])
            _ = try server.postEvents(Body.event("impression", session: "secret-session-name", ad: "a"))
            #expect(server.stop() == 0)
            let lines = server.child.stdout.text.split(separator: "\n")
            #expect(lines.count >= 6)
            var requestLines: [[String: Any]] = []
            var listening: [[String: Any]] = []
            for line in lines {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
                #expect(object["ts"] is String && object["level"] is String && object["msg"] is String, "\(line)")
                if object["msg"] as? String == "request" { requestLines.append(object) }
                if object["msg"] as? String == "listening" { listening.append(object) }
            }
            #expect(listening.count == 1, "\(listening)")
            #expect(listening.first?["port"] as? Int == server.port)
            #expect(requestLines.count == 5)
            for request in requestLines {
                for field in ["method", "route", "request_id"] {
                    #expect(request[field] is String, "request line without text \(field): \(request)")
                }
                // The route pattern stands for the path: no identifier from a path is logged.
                #expect(request["path"] == nil, "a request line carries the path: \(request)")
                // Numbers are JSON numbers, not strings, so that log queries can compare them.
                for field in ["status", "bytes", "duration_ms"] {
                    #expect(request[field] is NSNumber, "request line without numeric \(field): \(request)")
                }
                let status = request["status"] as? Int ?? 0
                #expect(status >= 400 ? request["code"] is String : request["code"] == nil, "\(request)")
            }
            let byID = { (id: String) in requestLines.first { $0["request_id"] as? String == id } }
            #expect(byID("req-abc-123")?["status"] as? Int == 200)
            #expect(byID("req-no-token")?["status"] as? Int == unauthorized.status)
            #expect(byID("req-no-token")?["code"] as? String == unauthorized.errorCode)
            let missingLine = requestLines.first { $0["route"] as? String == "/v1/sessions/{session_id}/feed" }
            #expect(missingLine?["code"] as? String == missing.errorCode)
            #expect(missing.errorCode != nil && unauthorized.errorCode != nil)
            let everything = server.child.stdout.text + server.child.stderr.text
            #expect(!everything.contains(ServerProcess.adminToken), "the admin token leaked into the log")
            #expect(!everything.contains("secret-session-name"), "event payload logged at info")
            #expect(!everything.contains("secret-session-in-a-path"), "an identifier from a path was logged")
        }

        @Test func requestIDIsEchoed() throws {
            let server = try ServerProcess.start()
            defer { server.kill() }
            let given = try server.request("GET", "/healthz", headers: [("X-Request-Id", "abc-123")])
            #expect(given.header("X-Request-Id") == "abc-123")
            let generated = try server.request("GET", "/healthz")
            #expect((generated.header("X-Request-Id") ?? "").count >= 8)
        }

        /// Parses text exposition format 0.0.4: `# HELP`/`# TYPE` comments and `name{labels} value`.
        static func parsePrometheus(_ text: String) throws -> [String: Double] {
            var samples: [String: Double] = [:]
            var typed: Set<String> = []
            for line in text.split(separator: "\n") {
                if line.hasPrefix("# TYPE ") {
                    let parts = line.split(separator: " ")
                    #expect(parts.count == 4 && ["counter", "gauge", "histogram"].contains(parts[3]), "bad TYPE line: \(line)")
                    typed.insert(String(parts[2]))
                    continue
                }
                if line.hasPrefix("#") { continue }
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                    Issue.record("bad sample line: \(line)")
                    continue
                }
                let series = String(line[..<space])
                let name = String(series.prefix { $0 != "{" })
                let family = typed.first { name == $0 || name.hasPrefix($0 + "_") }
                #expect(family != nil, "sample before its TYPE: \(line)")
                samples[series] = value
            }
            return samples
        }
    }
}
