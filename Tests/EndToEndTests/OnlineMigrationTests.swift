import Foundation
import Testing

extension EndToEnd {
    /// A table changed under the running service, as an online migration would: with one pooled
    /// connection, every later request must still be answered from it (or its replacement), not
    /// with `500`.
    @Suite(.timeLimit(.minutes(5))) struct OnlineMigration {
        @Test func aColumnTypeChangedUnderTheServiceLeavesEveryEndpointAnswering() throws {
            let server = try ServerProcess.start(extra: ["ADTALLY_DB_POOL_SIZE": "1"])
            defer { server.kill() }
            let session = "online-1"
            #expect(try server.putFeed(session, snapshot: "f-1", ads: [Body.ad("ad-o", 2, "acme")]).status == 201)
            #expect(try server.postEvents(Body.event("impression", session: session, ad: "ad-o")).status == 200)
            // Every statement the later requests use is prepared on the one connection now.
            #expect(try server.request("GET", "/v1/reports/ads/ad-o", headers: [Body.auth]).status == 200)
            #expect(try server.request("GET", "/v1/sessions/\(session)/feed", headers: [Body.auth]).status == 200)
            #expect(try server.request("GET", "/v1/reports/ads", headers: [Body.auth]).status == 200)

            _ = try Psql.value("ALTER TABLE ads ALTER COLUMN advertiser_id TYPE varchar(300)", server.databaseURL)

            for round in 0..<20 {
                let report = try server.request("GET", "/v1/reports/ads/ad-o", headers: [Body.auth])
                #expect(report.status == 200, "round \(round): \(report.text)")
                #expect(report.json?["advertiser_id"] as? String == "acme")
                #expect(report.json?["impressions"] as? Int == 1)
                let feed = try server.request("GET", "/v1/sessions/\(session)/feed", headers: [Body.auth])
                #expect(feed.status == 200, "round \(round): \(feed.text)")
                #expect((feed.json?["ads"] as? [[String: Any]])?.first?["advertiser_id"] as? String == "acme")
                let listing = try server.request("GET", "/v1/reports/ads", headers: [Body.auth])
                #expect(listing.status == 200, "round \(round): \(listing.text)")
                #expect(try server.request("GET", "/readyz").status == 200)
            }
            // Writes go on too.
            let put = try server.putFeed(session, snapshot: "f-2", ads: [Body.ad("ad-o", 4, "acme"), Body.ad("ad-p", 5, "globex")])
            #expect(put.status == 201, "\(put.text)")
            let click = try server.postEvents(Body.event("click", session: session, ad: "ad-p"))
            #expect(click.status == 200, "\(click.text)")
            #expect(server.stop() == 0)
        }
    }
}
