@testable import AdTally
import Foundation
import HTTP
import Postgres
import Testing
import Timestamps

/// The report endpoints against the real PostgreSQL, on fixtures with hand-computed counts; every
/// report is also checked against a direct SQL count over the stored events.
@Suite(.timeLimit(.minutes(5))) struct ReportRoutesTests {
    typealias F = StoreFixture
    static func t(_ text: String) -> Timestamp { ReportFixture.time(text) }

    /// Events through the real EventStore, so statuses and reasons are the rules' own.
    @Test func billableDuplicateAndRejectedThroughTheRealRules() async throws {
        let r = try ReportFixture()
        let f = r.store
        try f.feed("s1", "f1", [F.ad("ad-42", 3), F.ad("ad-77", 9, advertiser: "globex")])
        let viewable = Visibility(fraction: 0.8, milliseconds: 1200)
        let glance = Visibility(fraction: 0.3, milliseconds: 2000)
        #expect(try f.send([
            F.event(.impression, "s1", "ad-42", visibility: viewable),    // accepted
            F.event(.impression, "s1", "ad-42"),                          // duplicate
            F.event(.impression, "s1", "ad-42", visibility: glance),      // rejected not_viewable
            F.event(.impression, "s1", "ad-99"),                          // rejected ad_not_served (ad-99)
            F.event(.click, "s1", "ad-42"),                               // accepted
            F.event(.click, "s1", "ad-42"),                               // duplicate click_within_window
            F.event(.click, "s1", "ad-42", snapshot: "f0"),               // rejected stale_snapshot
            F.event(.click, "s1", "ad-42", position: 5),                  // rejected position_mismatch
            F.event(.click, "s1", "ad-11"),                               // rejected ad_not_in_feed (ad-11)
        ]) == [.accepted, .duplicate(.impressionAlreadyCounted), .rejected(.notViewable), .rejected(.adNotServed),
               .accepted, .duplicate(.clickWithinWindow), .rejected(.staleSnapshot), .rejected(.positionMismatch),
               .rejected(.adNotInFeed)])
        f.clock.advance(seconds: 60)
        try f.feed("s2", "f2", [F.ad("ad-42", 1)])
        try f.feed("s3", "f3", [F.ad("ad-42", 1)])
        _ = try f.send([F.event(.impression, "s2", "ad-42"), F.event(.click, "s2", "ad-42"), F.event(.impression, "s3", "ad-42")])

        let response = await r.get("/v1/reports/ads/ad-42")
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.textWithoutFinalBefore == """
            {"ad_id":"ad-42","advertiser_id":"acme","from":null,"to":null,"tz":"UTC","final_before":"FINAL","final":false,"impressions":3,"clicks":2,\
            "ctr":0.666667,"duplicate_impressions":1,"rejected_impressions":1,"duplicate_clicks":1,"rejected_clicks":2,\
            "rejections":{"ad_not_in_feed":0,"stale_snapshot":1,"position_mismatch":1,"not_viewable":1,"ad_not_served":0,"no_impression":0,\
            "click_limit_exceeded":0,"bot_agent":0,"blocked_address":0},\
            "duplicates":{"impression_already_counted":1,"click_within_window":1,"simultaneous_click":0}}
            """)
        try r.expectMatchesSQL(response.json, ad: "ad-42", from: nil, to: nil)

        // The rejected ads that were never in the ads table: advertiser null, counted all the same.
        let ad99 = await r.get("/v1/reports/ads/ad-99").json
        #expect(ad99["advertiser_id"]?.isNull == true)
        #expect(ad99["rejected_impressions"]?.numberValue?.int64 == 1)
        #expect(ad99["rejections"]?["ad_not_served"]?.numberValue?.int64 == 1)
        #expect(ad99["ctr"]?.isNull == true)
        try r.expectMatchesSQL(ad99, ad: "ad-99", from: nil, to: nil)
        try r.expectMatchesSQL(await r.get("/v1/reports/ads/ad-11").json, ad: "ad-11", from: nil, to: nil)

        // The first batch alone (received at the fixture start, the second batch a minute later).
        let first = await r.get("/v1/reports/ads/ad-42?from=2026-11-29T13:47:00Z&to=2026-11-29T13:48:00Z").json
        #expect(first["impressions"]?.numberValue?.int64 == 1)
        #expect(first["clicks"]?.numberValue?.int64 == 1)
        #expect(first["ctr"]?.numberValue?.lexeme == "1.0")
        try r.expectMatchesSQL(first, ad: "ad-42", from: Self.t("2026-11-29T13:47:00Z"), to: Self.t("2026-11-29T13:48:00Z"))

        let listing = await r.get("/v1/reports/ads")
        #expect(listing.status == 200)
        #expect(listing.json["rows"]?.arrayValue?.map { $0["ad_id"]?.stringValue ?? "" } == ["ad-11", "ad-42", "ad-99"])
        try r.expectListingMatchesSQL(listing.json, from: nil, to: nil, bucketMicroseconds: nil)
    }

    @Test func unknownAdAnswersZeros() async throws {
        let r = try ReportFixture()
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-29T10:00:00Z")
        let response = await r.get("/v1/reports/ads/no-such-ad?from=2026-11-01T00:00:00Z")
        #expect(response.status == 200)
        #expect(response.textWithoutFinalBefore == """
            {"ad_id":"no-such-ad","advertiser_id":null,"from":"2026-11-01T00:00:00.000Z","to":null,"tz":"UTC","final_before":"FINAL","final":false,\
            "impressions":0,"clicks":0,"ctr":null,"duplicate_impressions":0,"rejected_impressions":0,"duplicate_clicks":0,"rejected_clicks":0,\
            "rejections":{"ad_not_in_feed":0,"stale_snapshot":0,"position_mismatch":0,"not_viewable":0,"ad_not_served":0,"no_impression":0,\
            "click_limit_exceeded":0,"bot_agent":0,"blocked_address":0},\
            "duplicates":{"impression_already_counted":0,"click_within_window":0,"simultaneous_click":0}}
            """)
        // A known ad with nothing in the range: zeros, with its advertiser.
        try r.ad("ad-1", advertiser: "acme")
        let quiet = await r.get("/v1/reports/ads/ad-1?to=2026-11-29T10:00:00Z").json
        #expect(quiet["advertiser_id"]?.stringValue == "acme")
        #expect(ReportFixture.counts(quiet) == ReportCounts())
        // And the listing leaves out ads with no events in the range.
        #expect(await r.get("/v1/reports/ads?to=2026-11-29T10:00:00Z").textWithoutFinalBefore == #"{"from":null,"to":"2026-11-29T10:00:00.000Z","granularity":"total","tz":"UTC","final_before":"FINAL","rows":[]}"#)
    }

    @Test func rangeBoundariesFromIncludedToExcluded() async throws {
        let r = try ReportFixture()
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-29T09:59:59.999999Z", session: "a")  // before from
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-29T10:00:00Z", session: "b")         // exactly from: in
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-29T10:30:00Z", session: "c")         // in
        try r.insert("ad-1", "click", "accepted", at: "2026-11-29T10:59:59.999999Z", session: "c")       // last microsecond: in
        try r.insert("ad-1", "click", "accepted", at: "2026-11-29T11:00:00Z", session: "b")              // exactly to: out
        let range = "from=2026-11-29T10:00:00Z&to=2026-11-29T11:00:00Z"
        let single = await r.get("/v1/reports/ads/ad-1?\(range)").json
        #expect(single["impressions"]?.numberValue?.int64 == 2)
        #expect(single["clicks"]?.numberValue?.int64 == 1)
        #expect(single["ctr"]?.numberValue?.lexeme == "0.5")
        try r.expectMatchesSQL(single, ad: "ad-1", from: Self.t("2026-11-29T10:00:00Z"), to: Self.t("2026-11-29T11:00:00Z"))
        let listing = await r.get("/v1/reports/ads?\(range)").json
        #expect(listing["rows"]?.arrayValue?.first?["impressions"]?.numberValue?.int64 == 2)
        try r.expectListingMatchesSQL(listing, from: Self.t("2026-11-29T10:00:00Z"), to: Self.t("2026-11-29T11:00:00Z"), bucketMicroseconds: nil)
        // Microseconds count; digits past them are truncated, and the echo is truncated to milliseconds.
        let fine = await r.get("/v1/reports/ads/ad-1?from=2026-11-29T09:59:59.9999999Z&to=2026-11-29T10:59:59.9999999Z").json
        #expect(fine["from"]?.stringValue == "2026-11-29T09:59:59.999Z")
        #expect(fine["to"]?.stringValue == "2026-11-29T10:59:59.999Z")
        #expect(fine["impressions"]?.numberValue?.int64 == 3)  // 09:59:59.999999 is in, the click at 10:59:59.999999 is out
        #expect(fine["clicks"]?.numberValue?.int64 == 0)
        try r.expectMatchesSQL(fine, ad: "ad-1", from: Self.t("2026-11-29T09:59:59.999999Z"), to: Self.t("2026-11-29T10:59:59.999999Z"))
    }

    @Test func offsetsInTheQueryAreAnsweredInUTC() async throws {
        let r = try ReportFixture()
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-28T18:29:59.999Z", session: "a")  // before
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-28T18:30:00Z", session: "b")      // = from in +05:30
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-29T07:59:59Z", session: "c")      // in
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-29T08:00:00Z", session: "d")      // = to in -08:00
        // 2026-11-29T00:00+05:30 is 2026-11-28T18:30Z; 2026-11-29T00:00-08:00 is 2026-11-29T08:00Z.
        let response = await r.get("/v1/reports/ads/ad-1?from=2026-11-29T00:00:00%2B05:30&to=2026-11-29T00:00:00-08:00")
        #expect(response.json["from"]?.stringValue == "2026-11-28T18:30:00.000Z")
        #expect(response.json["to"]?.stringValue == "2026-11-29T08:00:00.000Z")
        #expect(response.json["impressions"]?.numberValue?.int64 == 2)
        try r.expectMatchesSQL(response.json, ad: "ad-1", from: Self.t("2026-11-28T18:30:00Z"), to: Self.t("2026-11-29T08:00:00Z"))
        let listing = await r.get("/v1/reports/ads?from=2026-11-29T00:00:00.000%2B05:30&to=2026-11-29T00:00:00-08:00&granularity=day").json
        #expect(listing["from"]?.stringValue == "2026-11-28T18:30:00.000Z")
        #expect(listing["to"]?.stringValue == "2026-11-29T08:00:00.000Z")
        // Buckets are UTC days whatever offset the query used.
        #expect(listing["rows"]?.arrayValue?.map { $0["bucket_start"]?.stringValue ?? "" } == ["2026-11-28T00:00:00.000Z", "2026-11-29T00:00:00.000Z"])
        #expect(listing["rows"]?.arrayValue?.map { $0["impressions"]?.numberValue?.int64 ?? -1 } == [1, 1])
        try r.expectListingMatchesSQL(listing, from: Self.t("2026-11-28T18:30:00Z"), to: Self.t("2026-11-29T08:00:00Z"),
                                      bucketMicroseconds: 86_400_000_000)
    }

    /// Two ads of two advertisers around midnight UTC 2026-11-29/30.
    func midnightFixture() throws -> ReportFixture {
        let r = try ReportFixture()
        try r.ad("ad-b", advertiser: "acme")
        try r.ad("ad-a", advertiser: "globex")
        try r.ad("ad-c", advertiser: "acme")
        try r.insert("ad-b", "impression", "accepted", at: "2026-11-29T22:15:00Z", session: "1")
        try r.insert("ad-b", "impression", "accepted", at: "2026-11-29T23:59:59.999999Z", session: "2")
        try r.insert("ad-b", "click", "accepted", at: "2026-11-29T23:59:59.999999Z", session: "2")
        try r.insert("ad-b", "impression", "duplicate", "impression_already_counted", at: "2026-11-30T00:00:00Z", session: "2")
        try r.insert("ad-b", "impression", "accepted", at: "2026-11-30T00:00:00Z", session: "3")
        try r.insert("ad-b", "click", "rejected", "stale_snapshot", at: "2026-11-30T00:30:00Z", session: "3")
        try r.insert("ad-b", "click", "duplicate", "click_within_window", at: "2026-11-30T01:00:00Z", session: "2")
        try r.insert("ad-a", "impression", "rejected", "ad_not_served", at: "2026-11-29T23:00:00Z", session: "4")
        try r.insert("ad-a", "click", "accepted", at: "2026-11-30T00:10:00Z", session: "4")
        try r.insert("ad-z", "impression", "accepted", at: "2026-11-30T00:20:00Z", session: "5")   // never in a snapshot
        return r
    }

    @Test func dayBucketsAcrossMidnightUTC() async throws {
        let r = try midnightFixture()
        let response = await r.get("/v1/reports/ads?granularity=day")
        #expect(response.status == 200)
        #expect(response.textWithoutFinalBefore == """
            {"from":null,"to":null,"granularity":"day","tz":"UTC","final_before":"FINAL","rows":[\
            {"ad_id":"ad-a","advertiser_id":"globex","bucket_start":"2026-11-29T00:00:00.000Z","final":true,"impressions":0,"clicks":0,"ctr":null,"duplicate_impressions":0,"rejected_impressions":1,"duplicate_clicks":0,"rejected_clicks":0,"rejections":{"ad_not_in_feed":0,"stale_snapshot":0,"position_mismatch":0,"not_viewable":0,"ad_not_served":1,"no_impression":0,"click_limit_exceeded":0,"bot_agent":0,"blocked_address":0},"duplicates":{"impression_already_counted":0,"click_within_window":0,"simultaneous_click":0}},\
            {"ad_id":"ad-a","advertiser_id":"globex","bucket_start":"2026-11-30T00:00:00.000Z","final":true,"impressions":0,"clicks":1,"ctr":null,"duplicate_impressions":0,"rejected_impressions":0,"duplicate_clicks":0,"rejected_clicks":0,"rejections":{"ad_not_in_feed":0,"stale_snapshot":0,"position_mismatch":0,"not_viewable":0,"ad_not_served":0,"no_impression":0,"click_limit_exceeded":0,"bot_agent":0,"blocked_address":0},"duplicates":{"impression_already_counted":0,"click_within_window":0,"simultaneous_click":0}},\
            {"ad_id":"ad-b","advertiser_id":"acme","bucket_start":"2026-11-29T00:00:00.000Z","final":true,"impressions":2,"clicks":1,"ctr":0.5,"duplicate_impressions":0,"rejected_impressions":0,"duplicate_clicks":0,"rejected_clicks":0,"rejections":{"ad_not_in_feed":0,"stale_snapshot":0,"position_mismatch":0,"not_viewable":0,"ad_not_served":0,"no_impression":0,"click_limit_exceeded":0,"bot_agent":0,"blocked_address":0},"duplicates":{"impression_already_counted":0,"click_within_window":0,"simultaneous_click":0}},\
            {"ad_id":"ad-b","advertiser_id":"acme","bucket_start":"2026-11-30T00:00:00.000Z","final":true,"impressions":1,"clicks":0,"ctr":0.0,"duplicate_impressions":1,"rejected_impressions":0,"duplicate_clicks":1,"rejected_clicks":1,"rejections":{"ad_not_in_feed":0,"stale_snapshot":1,"position_mismatch":0,"not_viewable":0,"ad_not_served":0,"no_impression":0,"click_limit_exceeded":0,"bot_agent":0,"blocked_address":0},"duplicates":{"impression_already_counted":1,"click_within_window":1,"simultaneous_click":0}},\
            {"ad_id":"ad-z","advertiser_id":null,"bucket_start":"2026-11-30T00:00:00.000Z","final":true,"impressions":1,"clicks":0,"ctr":0.0,"duplicate_impressions":0,"rejected_impressions":0,"duplicate_clicks":0,"rejected_clicks":0,"rejections":{"ad_not_in_feed":0,"stale_snapshot":0,"position_mismatch":0,"not_viewable":0,"ad_not_served":0,"no_impression":0,"click_limit_exceeded":0,"bot_agent":0,"blocked_address":0},"duplicates":{"impression_already_counted":0,"click_within_window":0,"simultaneous_click":0}}]}
            """)
        try r.expectListingMatchesSQL(response.json, from: nil, to: nil, bucketMicroseconds: 86_400_000_000)
    }

    @Test func hourBucketsAcrossMidnightUTC() async throws {
        let r = try midnightFixture()
        let response = await r.get("/v1/reports/ads?granularity=hour&from=2026-11-29T23:00:00Z&to=2026-11-30T00:30:00Z&advertiser_id=acme")
        #expect(response.json["granularity"]?.stringValue == "hour")
        let rows = response.json["rows"]?.arrayValue ?? []
        #expect(rows.map { "\($0["ad_id"]?.stringValue ?? "") \($0["bucket_start"]?.stringValue ?? "")" }
                == ["ad-b 2026-11-29T23:00:00.000Z", "ad-b 2026-11-30T00:00:00.000Z"])
        #expect(rows.map { ReportFixture.counts($0) } == [
            ReportCounts(impressions: 1, clicks: 1),
            ReportCounts(impressions: 1, duplicateImpressions: 1),   // the stale click at 00:30 is at `to`: out
        ])
        try r.expectListingMatchesSQL(response.json, from: Self.t("2026-11-29T23:00:00Z"), to: Self.t("2026-11-30T00:30:00Z"),
                                      bucketMicroseconds: 3_600_000_000, advertiser: "acme")
        let all = await r.get("/v1/reports/ads?granularity=hour&from=2026-11-29T00:00:00Z&to=2026-12-01T00:00:00Z").json
        #expect(all["rows"]?.arrayValue?.count == 7)
        try r.expectListingMatchesSQL(all, from: Self.t("2026-11-29T00:00:00Z"), to: Self.t("2026-12-01T00:00:00Z"), bucketMicroseconds: 3_600_000_000)
    }

    @Test func advertiserFilter() async throws {
        let r = try midnightFixture()
        let acme = await r.get("/v1/reports/ads?advertiser_id=acme").json
        #expect(acme["rows"]?.arrayValue?.map { $0["ad_id"]?.stringValue ?? "" } == ["ad-b"])  // ad-c has no events
        #expect(ReportFixture.counts(acme["rows"]?.arrayValue?.first ?? .null)
                == ReportCounts(impressions: 3, clicks: 1, duplicateImpressions: 1, duplicateClicks: 1, rejectedClicks: 1))
        try r.expectListingMatchesSQL(acme, from: nil, to: nil, bucketMicroseconds: nil, advertiser: "acme")
        let globex = await r.get("/v1/reports/ads?advertiser_id=globex&to=2026-11-30T00:00:00Z").json
        #expect(globex["rows"]?.arrayValue?.count == 1)
        try r.expectListingMatchesSQL(globex, from: nil, to: Self.t("2026-11-30T00:00:00Z"), bucketMicroseconds: nil, advertiser: "globex")
        #expect(await r.get("/v1/reports/ads?advertiser_id=nobody").json["rows"]?.arrayValue?.isEmpty == true)
        // Without the filter, every ad with events, in byte order (upper case before lower case).
        try r.insert("AD-UPPER", "click", "accepted", at: "2026-11-30T00:00:00Z")
        let all = await r.get("/v1/reports/ads").json
        #expect(all["rows"]?.arrayValue?.map { $0["ad_id"]?.stringValue ?? "" } == ["AD-UPPER", "ad-a", "ad-b", "ad-z"])
        try r.expectListingMatchesSQL(all, from: nil, to: nil, bucketMicroseconds: nil)
    }

    @Test func csvHeaderColumnOrderAndEmptyFields() async throws {
        let r = try midnightFixture()
        let expected = """
            ad_id,advertiser_id,bucket_start,impressions,clicks,ctr,duplicate_impressions,rejected_impressions,duplicate_clicks,rejected_clicks,\
            final,rejected_ad_not_in_feed,rejected_stale_snapshot,rejected_position_mismatch,rejected_not_viewable,rejected_ad_not_served,\
            rejected_no_impression,rejected_click_limit_exceeded,rejected_bot_agent,rejected_blocked_address,\
            duplicate_impression_already_counted,duplicate_click_within_window,duplicate_simultaneous_click\r
            ad-a,globex,,0,1,,0,1,0,0,false,0,0,0,0,1,0,0,0,0,0,0,0\r
            ad-b,acme,,3,1,0.333333,1,0,1,1,false,0,1,0,0,0,0,0,0,0,1,1,0\r
            ad-z,,,1,0,0.0,0,0,0,0,false,0,0,0,0,0,0,0,0,0,0,0,0\r

            """
        let byFormat = await r.get("/v1/reports/ads?format=csv")
        #expect(byFormat.status == 200)
        #expect(byFormat.headers["Content-Type"] == "text/csv; charset=utf-8")
        #expect(byFormat.text == expected)
        let byAccept = await r.get("/v1/reports/ads", headers: [("Accept", "text/csv")])
        #expect(byAccept.headers["Content-Type"] == "text/csv; charset=utf-8")
        #expect(byAccept.text == expected)
        #expect(await r.get("/v1/reports/ads?format=json", headers: [("Accept", "text/csv")]).headers["Content-Type"] == "application/json")
        let daily = await r.get("/v1/reports/ads?format=csv&granularity=day&advertiser_id=acme").text
        #expect(daily.split(separator: "\r\n").dropFirst().map(String.init) == [
            "ad-b,acme,2026-11-29T00:00:00.000Z,2,1,0.5,0,0,0,0,true,0,0,0,0,0,0,0,0,0,0,0,0",
            "ad-b,acme,2026-11-30T00:00:00.000Z,1,0,0.0,1,0,1,1,true,0,1,0,0,0,0,0,0,0,1,1,0",
        ])
        // A reader that takes the first ten columns by position reads what it read before 1.3.
        #expect(byFormat.text.split(separator: "\r\n").map { $0.split(separator: ",", omittingEmptySubsequences: false).prefix(10).joined(separator: ",") } == [
            "ad_id,advertiser_id,bucket_start,impressions,clicks,ctr,duplicate_impressions,rejected_impressions,duplicate_clicks,rejected_clicks",
            "ad-a,globex,,0,1,,0,1,0,0", "ad-b,acme,,3,1,0.333333,1,0,1,1", "ad-z,,,1,0,0.0,0,0,0,0",
        ])
        // An empty listing is the header alone.
        #expect(await r.get("/v1/reports/ads?format=csv&advertiser_id=nobody").text == expected.split(separator: "\r\n")[0] + "\r\n")
    }

    @Test func ctrNullNonNullAndRounded() async throws {
        let r = try ReportFixture()
        for i in 0..<3 { try r.insert("ad-third", "impression", "accepted", at: "2026-11-29T10:00:0\(i)Z", session: "s\(i)") }
        try r.insert("ad-third", "click", "accepted", at: "2026-11-29T10:00:05Z")
        for i in 0..<3 { try r.insert("ad-twothirds", "impression", "accepted", at: "2026-11-29T10:00:0\(i)Z", session: "s\(i)") }
        for i in 0..<2 { try r.insert("ad-twothirds", "click", "accepted", at: "2026-11-29T10:00:0\(i)Z", session: "s\(i)") }
        try r.insert("ad-clicks-only", "click", "accepted", at: "2026-11-29T10:00:00Z")
        try r.insert("ad-clicks-only", "impression", "duplicate", "impression_already_counted", at: "2026-11-29T10:00:00Z")
        #expect(await r.get("/v1/reports/ads/ad-third").json["ctr"]?.numberValue?.lexeme == "0.333333")
        #expect(await r.get("/v1/reports/ads/ad-twothirds").json["ctr"]?.numberValue?.lexeme == "0.666667")
        // Duplicate impressions are not billable: no billable impressions, so no ratio.
        #expect(await r.get("/v1/reports/ads/ad-clicks-only").json["ctr"]?.isNull == true)
        let listing = await r.get("/v1/reports/ads").json
        #expect(listing["rows"]?.arrayValue?.map { $0["ctr"]?.numberValue?.lexeme ?? "null" } == ["null", "0.333333", "0.666667"])
        try r.expectListingMatchesSQL(listing, from: nil, to: nil, bucketMicroseconds: nil)
    }

    @Test func listingIsStreamedInBatches() async throws {
        let r = try ReportFixture(fetchSize: 2)
        for i in 0..<5 { try r.insert("ad-\(i)", "impression", "accepted", at: "2026-11-29T10:00:00Z") }
        let response = await r.get("/v1/reports/ads")
        #expect(response.status == 200)
        // The opening, three batches of at most two rows, the closing.
        #expect(response.chunks == 5)
        #expect(response.json["rows"]?.arrayValue?.count == 5)
        try r.expectListingMatchesSQL(response.json, from: nil, to: nil, bucketMicroseconds: nil)
        let csv = await r.get("/v1/reports/ads?format=csv")
        #expect(csv.chunks == 4)
        #expect(csv.text.split(separator: "\r\n").count == 6)
    }

    @Test(arguments: [
        // (target, authorized, status, code, field)
        ("/v1/reports/ads/ad-1", false, 401, "unauthorized", nil),
        ("/v1/reports/ads/bad%2Fid?from=x", false, 401, "unauthorized", nil),
        ("/v1/reports/ads/bad%2Fid?from=x", true, 400, "invalid_path", "ad_id"),
        ("/v1/reports/ads/ad-1?from=x", true, 400, "invalid_query", "from"),
        ("/v1/reports/ads/ad-1?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", true, 400, "invalid_query", "from"),
        ("/v1/reports/ads/ad-1?to=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z", true, 400, "invalid_query", "to"),
        ("/v1/reports/ads?granularity=minute", false, 401, "unauthorized", nil),
        ("/v1/reports/ads?granularity=minute", true, 400, "invalid_query", "granularity"),
        ("/v1/reports/ads?format=pdf", true, 400, "invalid_query", "format"),
        ("/v1/reports/ads?advertiser_id=a%20b", true, 400, "invalid_query", "advertiser_id"),
        ("/v1/reports/ads?advertiser_id=a+b", true, 400, "invalid_query", "advertiser_id"),
        ("/v1/reports/ads?granularity=hour&from=2026-11-01T00:00:00Z", true, 400, "invalid_query", "to"),
        ("/v1/reports/ads?granularity=hour&from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", true, 400, "invalid_query", "granularity"),
    ] as [(String, Bool, Int, String, String?)])
    func refusals(target: String, authorized: Bool, status: Int, code: String, field: String?) async throws {
        let r = try ReportFixture()
        let response = await r.get(target, authorized: authorized)
        #expect(response.status == status)
        #expect(response.errorCode == code)
        #expect(response.errorField == field)
    }

    @Test func databaseGoneIs503BeforeAnyByte() async throws {
        let r = try ReportFixture(connectionString: "postgresql://postgres@127.0.0.1:1/nothing")
        for target in ["/v1/reports/ads/ad-1", "/v1/reports/ads", "/v1/reports/ads?format=csv"] {
            let response = await r.get(target)
            #expect(response.status == 503)
            #expect(response.errorCode == "unavailable")
            #expect(response.headers["Retry-After"] == "1")
        }
        // Refusals of the query still come first.
        #expect(await r.get("/v1/reports/ads?from=x").status == 400)
    }
}
