import Foundation
import Synchronization
import TestSupport
import Testing

/// Advertiser keys across real processes (API.md section 13): a revocation through one process is
/// honoured by another on the same database within 5 s while reports are being read; a revoked key
/// that keeps trying is throttled like a guessed token; and a key is never written anywhere AdTally
/// or PostgreSQL writes: logs, metrics, error bodies, `pg_stat_statements`, PostgreSQL's log.
extension EndToEnd {
    @Suite(.timeLimit(.minutes(5))) struct AdvertiserKeys {
        static func makeKey(_ server: ServerProcess, _ advertiser: String, scopes: [String] = ["reports"]) throws -> (id: String, secret: String) {
            let answer = try server.request("POST", "/v1/advertisers/\(advertiser)/keys", headers: [Body.jsonType, Body.auth],
                                            body: Body.json(["name": "\(advertiser) billing", "scopes": scopes]))
            let object = try #require(answer.json, "\(answer.status) \(answer.text)")
            return (try #require(object["key_id"] as? String), try #require(object["key"] as? String))
        }

        static func bearer(_ key: String) -> (String, String) { ("Authorization", "Bearer \(key)") }

        @Test func aRevocationReachesAnotherProcessWithinFiveSecondsUnderReportLoad() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            let first = try ServerProcess.start(databaseURL: database.connectionString)
            defer { first.kill() }
            // The second process does not throttle failed credentials: the load's requests with the
            // revoked key would otherwise earn the address 429s that hide the 401 polled for.
            let second = try ServerProcess.start(databaseURL: database.connectionString, extra: ["ADTALLY_AUTH_FAILURES_PER_MINUTE": "0"])
            defer { second.kill() }
            #expect(try first.putFeed("s-1", snapshot: "f-1", ads: [Body.ad("ad-1", 0, "acme"), Body.ad("ad-2", 1, "globex")]).status == 201)
            #expect(try first.postEvents(["events": [Body.event("impression", session: "s-1", ad: "ad-1")]]).status == 200)
            let key = try Self.makeKey(first, "acme")

            // The other process learns of the new key from the database (it reads the keys again
            // within a second of a change).
            let learned = Date() + 10
            while Date() < learned, try second.request("GET", "/v1/reports/ads", headers: [Self.bearer(key.secret)]).status != 200 {
                Thread.sleep(forTimeInterval: 0.05)  // polling the other process
            }
            #expect(try second.request("GET", "/v1/reports/ads", headers: [Self.bearer(key.secret)]).status == 200)
            // The probe polled for the refusal: a listing with a granularity no report has, which a
            // key in force gets as `400` from the route's check, after the credential and before any
            // query, so that the poll measures when the key stops being honoured, not how long a
            // report takes under the load (on Citus, seconds).
            let probe = "/v1/reports/ads?granularity=fortnight"
            #expect(try second.request("GET", probe, headers: [Self.bearer(key.secret)]).status == 400)

            // Report load on the second process, by the key and the admin token, while the key is revoked.
            let stop = Atomic<Bool>(false)
            let statuses = Mutex<[Int: Int]>([:])
            let group = DispatchGroup()
            for worker in 0..<3 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    while !stop.load(ordering: .relaxed) {
                        let headers = worker == 0 ? [Body.auth] : [Self.bearer(key.secret)]
                        let path = worker == 2 ? "/v1/reports/ads/ad-1" : "/v1/reports/ads?granularity=day&format=csv"
                        let status = (try? second.request("GET", path, headers: headers).status) ?? -1
                        statuses.withLock { $0[status, default: 0] += 1 }
                    }
                }.start()
            }
            Thread.sleep(forTimeInterval: 0.5)  // let the load run before the revocation
            let revoked = try first.request("DELETE", "/v1/advertisers/acme/keys/\(key.id)", headers: [Body.auth])
            let answered = Date()
            #expect(revoked.status == 200)
            #expect(try first.request("GET", "/v1/reports/ads", headers: [Self.bearer(key.secret)]).status == 401, "at once where it was revoked")
            var refusedAfter: TimeInterval?
            while Date().timeIntervalSince(answered) < 10 {
                let status = try second.request("GET", probe, headers: [Self.bearer(key.secret)]).status
                #expect(status == 400 || status == 401, "the probe's answer: \(status)")
                if status == 401 {
                    refusedAfter = Date().timeIntervalSince(answered)
                    break
                }
                Thread.sleep(forTimeInterval: 0.02)  // polling the other process
            }
            stop.store(true, ordering: .relaxed)
            #expect(group.wait(timeout: .now() + 30) == .success)
            let seen = statuses.withLock { $0 }
            let refused = try #require(refusedAfter, "the other process still accepts the revoked key after 10 s; its log: \(second.child.stdout.text.suffix(3000))")
            #expect(refused < 5, "refused by the other process \(refused) s after the revocation")
            print("revocation reached the other process after \(String(format: "%.3f", refused)) s; report load answers: \(seen)")
            #expect(Set(seen.keys).isSubset(of: [200, 401]), "report load answers: \(seen)")
            #expect((seen[200] ?? 0) > 0)

            // A revoked key that keeps trying counts toward the address's failures: 45 tries span at
            // most two UTC minutes, so one minute holds more than 20 of them.
            var answers: [Int] = []
            for _ in 0..<45 { answers.append(try first.request("GET", "/v1/reports/ads", headers: [Self.bearer(key.secret)]).status) }
            #expect(answers.contains(429) && Set(answers).isSubset(of: [401, 429]), "\(answers)")
            let metrics = try first.request("GET", "/metrics").text
            #expect(metrics.contains(#"adtally_auth_total{credential="advertiser_key",outcome="revoked"}"#))
            #expect(!metrics.contains(#"adtally_auth_total{credential="advertiser_key",outcome="revoked"} 0"#))
            #expect(metrics.contains(#"adtally_advertiser_keys{state="revoked"} 1"#))
            // Its last use was written (each process writes uses every 30 s, and at shutdown).
            #expect(second.stop() == 0 && first.stop() == 0)
            let listed = try Psql.value("SELECT last_used_at IS NOT NULL FROM advertiser_keys WHERE key_id = '\(key.id)'", database.connectionString)
            #expect(listed == "t")
        }

        @Test func aKeyIsNeverInALogAMetricAnErrorOrAStatement() throws {
            let cluster = try DisposableCluster()
            _ = try Psql.value("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'", cluster.connectionString)
            try cluster.stop()
            try cluster.start()
            _ = try Psql.value("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", cluster.connectionString)
            let server = try ServerProcess.start(databaseURL: cluster.connectionString)
            defer { server.kill() }
            #expect(try server.putFeed("s-1", snapshot: "f-1", ads: [Body.ad("ad-1", 0, "acme")]).status == 201)
            let key = try Self.makeKey(server, "acme")
            let conversionsOnly = try Self.makeKey(server, "acme", scopes: ["conversions"])
            var bodies: [String] = []
            // Used, refused for a scope and an endpoint, revoked, refused, and a near miss.
            for (method, path, credential) in [("GET", "/v1/reports/ads", key.secret), ("GET", "/v1/reports/ads/ad-1", key.secret),
                                               ("GET", "/v1/sessions/s-1/feed", key.secret), ("GET", "/v1/reports/ads", conversionsOnly.secret),
                                               ("GET", "/v1/reports/ads?advertiser_id=globex", key.secret)] {
                bodies.append(try server.request(method, path, headers: [Self.bearer(credential)]).text)
            }
            #expect(try server.request("DELETE", "/v1/advertisers/acme/keys/\(key.id)", headers: [Body.auth]).status == 200)
            bodies.append(try server.request("GET", "/v1/reports/ads", headers: [Self.bearer(key.secret)]).text)
            bodies.append(try server.request("GET", "/v1/reports/ads", headers: [Self.bearer(String(key.secret.dropLast()) + "x")]).text)
            bodies.append(try server.request("GET", "/v1/advertisers/acme/keys", headers: [Body.auth]).text)
            let metrics = try server.request("GET", "/metrics").text
            #expect(server.stop() == 0)
            let statements = try Psql.value("SELECT string_agg(query, E'\\n') FROM pg_stat_statements", cluster.connectionString)
            #expect(statements.contains("advertiser_keys"), "pg_stat_statements saw AdTally's statements")
            let places = ["the server's standard output": server.child.stdout.text, "its standard error": server.child.stderr.text,
                          "/metrics": metrics, "the answers": bodies.joined(separator: "\n"), "pg_stat_statements": statements,
                          "PostgreSQL's log": try cluster.serverLog()]
            for secret in [key.secret, conversionsOnly.secret] {
                let body = String(secret.dropFirst(4))
                for (place, text) in places {
                    #expect(!text.contains(body), "a key's secret is in \(place)")
                }
            }
            // What is logged instead: the key's id and advertiser.
            #expect(server.child.stdout.text.contains(key.id))
        }
    }
}
