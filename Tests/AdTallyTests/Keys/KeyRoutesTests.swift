@testable import AdTally
import Foundation
import JSON
import Postgres
import Runtime
import Testing
import Timestamps

/// Advertiser keys as data (API.md section 13) against a real PostgreSQL: made, listed and revoked
/// through the API, stored as digests only, at most 20 active per advertiser, and honoured or
/// refused by the edge at once in the process that changed them.
@Suite(.timeLimit(.minutes(5))) struct KeyRoutesTests {
    typealias K = KeyFixture

    @Test func aKeyIsShownOnceStoredAsItsDigestAndListedWithoutIt() async throws {
        let f = try K()
        let made = await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin,
                                   body: #"{"name": "acme billing", "scopes": ["reports", "conversions"]}"#)
        #expect(made.status == 201, "\(made.text)")
        let secret = try #require(made.json["key"]?.stringValue)
        let keyID = try #require(made.json["key_id"]?.stringValue)
        // atk_ then 43 characters of base64url; key_ then 16 of a-z 0-9.
        #expect(secret.range(of: #"^atk_[A-Za-z0-9_-]{43}$"#, options: .regularExpression) != nil, "\(secret)")
        #expect(keyID.range(of: #"^key_[a-z0-9]{16}$"#, options: .regularExpression) != nil, "\(keyID)")
        #expect(made.json["advertiser_id"]?.stringValue == "acme")
        #expect(made.json["name"]?.stringValue == "acme billing")
        #expect(made.json["scopes"] == .array([.string("conversions"), .string("reports")]), "sorted")
        #expect(made.json["last_used_at"] == .null && made.json["revoked_at"] == .null)
        #expect(Timestamp(rfc3339: made.json["created_at"]?.stringValue ?? "") != nil)
        // The members in the contract's order.
        let order = ["key_id", "advertiser_id", "name", "scopes", "created_at", "last_used_at", "revoked_at", "key"]
        let positions = order.map { made.text.range(of: "\"\($0)\":")?.lowerBound }
        #expect(positions.allSatisfy { $0 != nil } && positions.compactMap { $0 } == positions.compactMap { $0 }.sorted())

        // The database holds the digest of the secret, and nothing of the secret itself.
        let stored = try f.connection.query("SELECT encode(digest, 'hex') FROM advertiser_keys WHERE key_id = $1", [keyID]).first?
            .decode(String.self, at: 0)
        #expect(stored == SHA256.hash(secret.utf8).hex)
        let secretBody = String(secret.dropFirst(4))
        let dump = try f.connection.query("SELECT string_agg(t::text, ' ') FROM advertiser_keys t").first?.decode(String.self, at: 0) ?? ""
        #expect(!dump.contains(secretBody) && !dump.contains(Data(secret.utf8).map { String(format: "%02x", $0) }.joined()))

        // The key works at once; the listing shows it without its secret.
        #expect(await f.get("/v1/reports/ads", secret).status == 200)
        let listed = await f.get("/v1/advertisers/acme/keys", K.admin)
        #expect(listed.status == 200)
        #expect(listed.json["advertiser_id"]?.stringValue == "acme")
        let entries = listed.json["keys"]?.arrayValue ?? []
        #expect(entries.count == 1 && entries.first?["key_id"]?.stringValue == keyID)
        #expect(entries.first?["key"] == nil && !listed.text.contains(secretBody))
        // Another advertiser's listing does not show it.
        #expect(await f.get("/v1/advertisers/globex/keys", K.admin).json["keys"] == .array([]))
    }

    @Test func scopesDefaultToBothAndBadBodiesAreRefusedNamingTheField() async throws {
        let f = try K()
        let both = await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin, body: #"{"name": "n", "scopes": null}"#)
        #expect(both.json["scopes"] == .array([.string("conversions"), .string("reports")]))
        let one = await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin, body: #"{"name": "n", "scopes": ["reports"]}"#)
        #expect(one.json["scopes"] == .array([.string("reports")]))
        let bad: [(String, String)] = [
            (#"{}"#, "name"), (#"{"name": ""}"#, "name"), (#"{"name": 7}"#, "name"),
            ("{\"name\": \"\(String(repeating: "é", count: 101))\"}", "name"), (#"{"name": "tab\there"}"#, "name"),
            (#"{"name": "bell\u0007"}"#, "name"), (#"{"name": "c1\u0085"}"#, "name"),
            (#"{"name": "n", "scopes": []}"#, "scopes"), (#"{"name": "n", "scopes": ["admin"]}"#, "scopes"),
            (#"{"name": "n", "scopes": ["reports", "reports"]}"#, "scopes"), (#"{"name": "n", "scopes": "reports"}"#, "scopes"),
            (#"{"name": "n", "scopes": [1]}"#, "scopes"),
        ]
        for (body, field) in bad {
            let answer = await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin, body: body)
            #expect(answer.status == 400 && answer.errorCode == "invalid_key_request" && answer.errorField == field, "\(body): \(answer.text)")
        }
        #expect(await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin, body: "[1]").errorCode == "malformed_json")
        #expect(await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin, body: "{").errorCode == "malformed_json")
        // 100 characters of any script are a name; so is one.
        let long = await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin,
                                   body: "{\"name\": \"\(String(repeating: "ж", count: 100))\"}")
        #expect(long.status == 201)
        #expect(await f.request("POST", "/v1/advertisers/bad%2Fid/keys", credential: K.admin, body: "{\"name\": \"n\"}").errorCode
                == "invalid_path")
    }

    @Test func twentyActiveKeysAtMostAndARevokedOneFreesItsPlace() async throws {
        let f = try K()
        var ids: [String] = []
        for n in 0..<KeyStore.maximumActiveKeys { ids.append(try await f.makeKey("acme", name: "k\(n)").id) }
        let refused = await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin, body: #"{"name": "21st"}"#)
        #expect(refused.status == 409 && refused.errorCode == "too_many_keys", "\(refused.text)")
        // Another advertiser is not held back by acme's keys.
        _ = try await f.makeKey("globex")
        #expect(await f.request("DELETE", "/v1/advertisers/acme/keys/\(ids[3])", credential: K.admin).status == 200)
        _ = try await f.makeKey("acme", name: "after a revocation")
        #expect(await f.request("POST", "/v1/advertisers/acme/keys", credential: K.admin, body: #"{"name": "22nd"}"#).status == 409)
        // Listed by created_at then key_id, revoked ones included.
        let listed = await f.get("/v1/advertisers/acme/keys", K.admin).json["keys"]?.arrayValue ?? []
        #expect(listed.count == KeyStore.maximumActiveKeys + 1)
        let stored = try f.connection.query("""
            SELECT key_id FROM advertiser_keys WHERE advertiser_id = 'acme' ORDER BY created_at, key_id COLLATE "C"
            """).rows.map { try $0.decode(String.self, at: 0) }
        #expect(listed.map { $0["key_id"]?.stringValue ?? "" } == stored)
        #expect(listed.filter { $0["revoked_at"] != .null }.map { $0["key_id"]?.stringValue } == [ids[3]])
    }

    @Test func revocationIsImmediateHereIdempotentAndScopedToItsAdvertiser() async throws {
        let f = try K()
        let key = try await f.makeKey("acme")
        let other = try await f.makeKey("globex")
        #expect(await f.get("/v1/reports/ads", key.secret).status == 200)
        #expect(await f.request("DELETE", "/v1/advertisers/globex/keys/\(key.id)", credential: K.admin).status == 404,
                "another advertiser's key is not found")
        #expect(await f.request("DELETE", "/v1/advertisers/acme/keys/key_0000000000000000", credential: K.admin).status == 404)
        let first = await f.request("DELETE", "/v1/advertisers/acme/keys/\(key.id)", credential: K.admin)
        #expect(first.status == 200 && first.json["key"] == nil)
        let revokedAt = try #require(first.json["revoked_at"]?.stringValue)
        f.store.clock.advance(seconds: 5)
        let again = await f.request("DELETE", "/v1/advertisers/acme/keys/\(key.id)", credential: K.admin)
        #expect(again.status == 200 && again.json["revoked_at"]?.stringValue == revokedAt, "the first revoked_at")
        // Refused at once, as an unknown key is; the other advertiser's key still works.
        let refused = await f.get("/v1/reports/ads", key.secret)
        #expect(refused.status == 401 && refused.errorCode == "unauthorized")
        #expect(refused.headers["WWW-Authenticate"] == "Bearer")
        #expect(await f.get("/v1/reports/ads", "atk_" + String(repeating: "A", count: 43)).status == 401)
        #expect(await f.get("/v1/reports/ads", other.secret).status == 200)
        let counts = Dictionary(uniqueKeysWithValues: f.authCounts.all.map { ("\($0.credential.rawValue)/\($0.outcome.rawValue)", $0.count) })
        #expect(counts["advertiser_key/revoked"] == 1 && counts["advertiser_key/unknown"] == 1 && counts["advertiser_key/ok"] == 2)
        #expect(f.keyring.counts == (1, 1))
    }

    @Test func aKeyIsForbiddenEverywhereButItsReportsAndScopesAreHonoured() async throws {
        let f = try K()
        let key = try await f.makeKey("acme")
        let conversionsOnly = try await f.makeKey("acme", scopes: ["conversions"])
        for (method, target, body) in [("GET", "/v1/advertisers/acme/keys", nil), ("POST", "/v1/advertisers/acme/keys", #"{"name": "n"}"#),
                                       ("DELETE", "/v1/advertisers/acme/keys/\(key.id)", nil), ("GET", "/v1/sessions/s-1/feed", nil),
                                       ("PUT", "/v1/sessions/s-1/feed", #"{"snapshot_id": "f", "ads": []}"#),
                                       ("DELETE", "/v1/sessions/s-1", nil), ("GET", "/v1/adjustments/adj-1", nil),
                                       ("POST", "/v1/adjustments", "{}")] as [(String, String, String?)] {
            let answer = await f.request(method, target, credential: key.secret, body: body)
            #expect(answer.status == 403 && answer.errorCode == "forbidden", "\(method) \(target): \(answer.text)")
        }
        for target in ["/v1/reports/ads", "/v1/reports/ads/ad-1", "/v1/reports/credits", "/v1/reports/ads/ad-1/events"] {
            let answer = await f.get(target, conversionsOnly.secret)
            #expect(answer.status == 403 && answer.errorCode == "forbidden", "\(target) without the reports scope")
        }
        // 401 before 403 before 400: a key asking for another advertiser is 403 even with a bad query.
        #expect(await f.get("/v1/reports/ads?advertiser_id=globex&from=nonsense", key.secret).status == 403)
        #expect(await f.get("/v1/reports/ads?advertiser_id=acme&from=nonsense", key.secret).errorCode == "invalid_query")
        #expect(await f.get("/v1/reports/credits?advertiser_id=globex", key.secret).status == 403)
        #expect(await f.get("/v1/reports/ads?advertiser_id=&advertiser_id=acme", key.secret).status == 200)
    }

    @Test func creationAndRevocationAreLoggedWithoutTheKey() async throws {
        let f = try K()
        let key = try await f.makeKey("acme")
        _ = await f.request("DELETE", "/v1/advertisers/acme/keys/\(key.id)", credential: K.admin)
        _ = await f.get("/v1/reports/ads", key.secret)
        _ = await f.get("/v1/reports/ads", "atk_" + String(repeating: "B", count: 43))
        f.outbox.flush()
        let lines = f.lines.all
        #expect(lines.contains { $0.contains("advertiser key created") && $0.contains(key.id) && $0.contains("\"advertiser_id\":\"acme\"") })
        #expect(lines.contains { $0.contains("advertiser key revoked") && $0.contains(key.id) })
        #expect(lines.contains { $0.contains("advertiser key refused: revoked") && $0.contains(key.id) && $0.contains("\"advertiser_id\":\"acme\"") })
        #expect(lines.contains { $0.contains("advertiser key refused: unknown") })
        #expect(lines.allSatisfy { !$0.contains(String(key.secret.dropFirst(4))) })
    }
}
