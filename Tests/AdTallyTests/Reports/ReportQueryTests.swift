@testable import AdTally
import HTTP
import Testing
import Timestamps

/// Query reading and `ctr` rounding, without a database.
@Suite(.timeLimit(.minutes(5))) struct ReportQueryTests {
    static func parameters(_ raw: String) -> QueryParameters { QueryParameters(decoding: Substring(raw))! }

    @Test(arguments: [
        // (query, field) for the listing; nil field: accepted.
        ("", nil),
        ("from=2026-11-01T00:00:00Z&to=2026-11-01T00:00:00Z", nil),            // empty range is fine
        ("from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", "from"),         // from after to
        ("from=yesterday", "from"),
        ("to=2026-11-01T00:00:00", "to"),                                       // no offset
        ("from=2026-11-01T00:00:00+05:30", "from"),                             // raw + decodes to a space
        ("from=2026-11-01T00:00:00%2B05:30", nil),
        ("from=2026-11-01T00:00:00Z&from=2026-11-02T00:00:00Z", "from"),        // repeated
        ("from=&from=2026-11-02T00:00:00Z", nil),                              // an empty value is absent
        ("to=&from=", nil),
        ("advertiser_id=acme%2Fx", "advertiser_id"),
        ("advertiser_id=acme&advertiser_id=acme", "advertiser_id"),
        ("granularity=Day", "granularity"),                                     // case-sensitive
        ("granularity=week", "granularity"),
        ("format=xml", "format"),
        ("format=CSV", "format"),
        ("format=csv&format=json", "format"),
        ("granularity=hour", "from"),
        ("granularity=hour&from=2026-11-01T00:00:00Z", "to"),
        ("granularity=hour&to=2026-11-01T00:00:00Z", "from"),
        ("granularity=hour&from=2025-07-21T08:00:00Z&to=2026-09-11T00:00:00Z", nil),      // exactly 10,000 hours
        ("granularity=hour&from=2025-07-21T07:59:59.999999Z&to=2026-09-11T00:00:00Z", "granularity"),
        ("granularity=day", nil),
        ("limit=5&unknown=x", nil),                                             // unknown parameters are ignored
        ("from=bad&advertiser_id=%25", "from"),                                 // first in order wins
        ("advertiser_id=%25&granularity=x", "advertiser_id"),
        ("from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z&granularity=x", "granularity"), // single checks before cross checks
    ] as [(String, String?)])
    func listingValidation(query: String, field: String?) {
        do {
            _ = try ReportQuery.forListing(Self.parameters(query), accept: nil)
            #expect(field == nil, "\(query) should be refused on \(field ?? "")")
        } catch {
            #expect(error.field == field, "\(query)")
        }
    }

    @Test func adReportReadsOnlyTheRange() throws {
        // granularity and format are not parameters of the single-ad report: ignored like any unknown.
        let q = try ReportQuery.forAd(Self.parameters("from=2026-11-01T00:00:00.1234567Z&granularity=bogus&format=xml"))
        #expect(q.from == Timestamp(rfc3339: "2026-11-01T00:00:00.123456Z"))
        #expect(throws: ReportQuery.Invalid.self) { try ReportQuery.forAd(Self.parameters("to=x")) }
    }

    @Test func timeZonesAreReadAsInstants() throws {
        let q = try ReportQuery.forListing(Self.parameters("from=2026-11-29T05:30:00%2B05:30&to=2026-11-28T16:00:00-08:00"), accept: nil)
        #expect(q.from?.rfc3339 == "2026-11-29T00:00:00.000Z")
        #expect(q.to?.rfc3339 == "2026-11-29T00:00:00.000Z")
    }

    @Test(arguments: [
        ("text/csv", true),
        ("TEXT/CSV; charset=utf-8", true),
        ("application/json", false),
        ("*/*", false),
        ("text/csv, application/json", true),
        ("application/json, text/csv;q=0.5", false),
        ("text/csv;q=0", false),
        ("text/csv;q=0.9, */*;q=0.1", true),
        ("text/html", false),
    ])
    func acceptHeader(accept: String, csv: Bool) throws {
        #expect(try ReportQuery.forListing(Self.parameters(""), accept: accept).format == (csv ? .csv : .json))
    }

    @Test func formatParameterWinsOverAccept() throws {
        #expect(try ReportQuery.forListing(Self.parameters("format=json"), accept: "text/csv").format == .json)
        #expect(try ReportQuery.forListing(Self.parameters("format=csv"), accept: "application/json").format == .csv)
    }

    @Test(arguments: [
        (0, 0, nil),
        (0, 5, 0.0),
        (1, 40, 0.025),
        (2, 3, 0.666667),
        (1, 3, 0.333333),
        (5, 8_000_000, 0.000001),   // 0.000000625: rounds up
        (1, 2_000_000, 0.000001),   // 0.0000005 exactly: half away from zero
        (1, 2_000_001, 0.0),        // just under half
        (3, 2_000_000, 0.000002),   // 0.0000015: half away from zero
        (7, 2, 3.5),                // clicks may outnumber impressions
    ] as [(Int64, Int64, Double?)])
    func ctrRounding(clicks: Int64, impressions: Int64, expected: Double?) {
        #expect(ReportCounts.ctr(clicks: clicks, impressions: impressions) == expected)
    }

    @Test func csvQuoting() {
        var bytes: [UInt8] = []
        ReportListingEncoder.appendCSVField("a,b\"c\r\nd", to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "\"a,b\"\"c\r\nd\"")
        bytes = []
        ReportListingEncoder.appendCSVField("ad-42", to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "ad-42")
    }
}
