@testable import AdTally
import AdTallyApp
import Foundation
import HTTP
import HTTPServer
import JSON
import Postgres
import Runtime
import TestSupport
import Testing
import Timestamps

/// A migrated database of its own (through `StoreFixture`), the report routes on a router, and a way
/// to send them raw HTTP requests in process: the request goes through the real parser, router, head
/// check and handler, and a streamed body is collected chunk by chunk.
struct ReportFixture {
    let store: StoreFixture
    let pool: PostgresPool
    let router: Router
    static let token = "report-test-token"

    struct Response {
        let status: Int
        let headers: HTTPHeaders
        let body: [UInt8]
        /// Number of writes of a streamed body; nil for a body with `Content-Length`.
        let chunks: Int?
        var text: String { String(decoding: body, as: UTF8.self) }
        /// The body with its `final_before` (the database's clock, different on every run) read
        /// out: checked to be a UTC timestamp no later than now, and replaced by `FINAL`, so that
        /// the rest can be compared whole.
        var textWithoutFinalBefore: String {
            let pattern = #""final_before":"([^"]*)""#
            guard let range = text.range(of: pattern, options: .regularExpression) else { return text }
            let value = String(text[range].dropFirst(#""final_before":""#.count).dropLast())
            if let instant = Timestamp(rfc3339: value), value.hasSuffix("Z") {
                #expect(instant <= SystemClock().now(), "final_before \(value) is later than now")
            } else {
                Issue.record("final_before is not a UTC timestamp: \(value)")
            }
            return text.replacingCharacters(in: range, with: #""final_before":"FINAL""#)
        }
        var json: JSONValue { (try? JSONParser.parse(body)) ?? .null }
        var errorField: String? { json["error"]?["field"]?.stringValue }
        var errorCode: String? { json["error"]?["code"]?.stringValue }
    }

    init(fetchSize: Int = 1_000, connectionString: String? = nil, horizon: Timestamp? = nil) throws {
        store = try StoreFixture()
        pool = PostgresPool(configuration: .init(connectionString: connectionString ?? store.database.connectionString, size: 2,
                                                 acquireTimeout: .seconds(2), connectTimeoutSeconds: 2))
        var edge = Edge(tokens: AccessTokens(admin: [Self.token], feed: [], reports: []), limits: nil)
        let bound = horizon ?? Timestamp(microsecondsSinceEpoch: .min)
        let database = ReadDatabase(pool: pool, isStandby: false, answerTimeout: .seconds(120), logger: .discarding)
        var routes = ReportRoutes(database: database, horizon: { bound }, maxDuration: Configuration().reportMaxDuration, registerZone: { _ in })
        routes.store = ReportStore(fetchSize: fetchSize)
        routes.register(on: &edge)
        self.router = edge.router
    }

    var connection: PostgresConnection { store.connection }

    /// `GET target` with the admin token unless `authorized` is false, through the router as the
    /// server calls it (`Router.respond(to:)`: head check, handler, a streamed body collected).
    func get(_ target: String, headers: [(String, String)] = [], authorized: Bool = true) async -> Response {
        var head = "GET \(target) HTTP/1.1\r\nHost: test\r\n"
        if authorized { head += "Authorization: Bearer \(Self.token)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return await Self.send(Array(head.utf8), to: router)
    }

    /// `bytes` (a whole request) parsed and answered by `router` as the server calls it
    /// (`Router.respond(to:)`: head check, handler, a streamed body collected chunk by chunk).
    static func send(_ bytes: [UInt8], to router: Router) async -> Response {
        guard case .complete(let request, _) = HTTPRequestParser().parse(bytes) else {
            Issue.record("unparseable request \(String(decoding: bytes.prefix(200), as: UTF8.self))")
            return Response(status: 0, headers: HTTPHeaders(), body: [], chunks: nil)
        }
        let answer = await router.respond(to: request, requestID: "test")
        if let error = answer.streamError { Issue.record("stream failed: \(error)") }
        guard case .bytes(let body) = answer.response.body else {
            Issue.record("the in-process answer kept a stream")
            return Response(status: 0, headers: answer.response.headers, body: [], chunks: nil)
        }
        return Response(status: answer.response.status.code, headers: answer.response.headers, body: body, chunks: answer.chunks?.count)
    }

    /// An event row written directly, with `received_at` under the test's control.
    func insert(_ ad: String, _ type: String, _ status: String, _ reason: String? = nil, at receivedAt: String,
                session: String = "s-direct") throws {
        guard let time = Timestamp(rfc3339: receivedAt) else { throw TestDatabaseError("bad time \(receivedAt)") }
        try connection.query("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at)
            VALUES ($1, gen_random_uuid(), $2, $3, $4, $5, $6, $6)
            """, [session, type, ad, status, reason, time])
    }

    func ad(_ ad: String, advertiser: String) throws {
        try connection.query("INSERT INTO ads (ad_id, advertiser_id) VALUES ($1, $2)", [ad, advertiser])
    }

    /// The six counts for one ad in `[from, to)` by a direct SQL count over the stored events,
    /// written independently of `ReportStore` (GROUP BY instead of FILTER, bounds as text).
    func sqlCounts(_ ad: String, from: Timestamp?, to: Timestamp?) throws -> ReportCounts {
        let rows = try connection.query("""
            SELECT type, status, count(*)::bigint FROM events
            WHERE ad_id = $1 AND ($2::timestamptz IS NULL OR received_at >= $2) AND ($3::timestamptz IS NULL OR received_at < $3)
            GROUP BY type, status
            """, [ad, from, to]).rows
        var counts = ReportCounts()
        for row in rows {
            let n = try row.decode(Int64.self, at: 2)
            switch (try row.decode(String.self, at: 0), try row.decode(String.self, at: 1)) {
            case ("impression", "accepted"): counts.impressions = n
            case ("click", "accepted"): counts.clicks = n
            case ("impression", "duplicate"): counts.duplicateImpressions = n
            case ("impression", "rejected"): counts.rejectedImpressions = n
            case ("click", "duplicate"): counts.duplicateClicks = n
            case ("click", "rejected"): counts.rejectedClicks = n
            default: Issue.record("unexpected row")
            }
        }
        return counts
    }

    /// The rejected events of one ad per reason by direct SQL.
    func sqlRejections(_ ad: String, from: Timestamp?, to: Timestamp?) throws -> [String: Int64] {
        var result: [String: Int64] = [:]
        for row in try connection.query("""
            SELECT reason, count(*)::bigint FROM events
            WHERE ad_id = $1 AND status = 'rejected'
              AND ($2::timestamptz IS NULL OR received_at >= $2) AND ($3::timestamptz IS NULL OR received_at < $3)
            GROUP BY reason
            """, [ad, from, to]).rows {
            result[try row.decode(String.self, at: 0)] = try row.decode(Int64.self, at: 1)
        }
        return result
    }

    /// Checks a single-ad report body against the direct SQL count.
    func expectMatchesSQL(_ body: JSONValue, ad: String, from: Timestamp?, to: Timestamp?,
                          sourceLocation: SourceLocation = #_sourceLocation) throws {
        let sql = try sqlCounts(ad, from: from, to: to)
        #expect(Self.counts(body) == sql, "report \(ad) differs from SQL", sourceLocation: sourceLocation)
        let rejections = try sqlRejections(ad, from: from, to: to)
        for reason in CountColumn.rejectionReasons {
            #expect(body["rejections"]?[reason.rawValue]?.numberValue?.int64 == rejections[reason.rawValue] ?? 0,
                    "rejections.\(reason.rawValue)", sourceLocation: sourceLocation)
        }
    }

    /// Checks every row of a listing against the direct SQL count of its ad and bucket (clipped to
    /// the query's range), and that no ad with events in the range is missing.
    func expectListingMatchesSQL(_ body: JSONValue, from: Timestamp?, to: Timestamp?, bucketMicroseconds: Int64?,
                                 advertiser: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let rows = body["rows"]?.arrayValue ?? []
        var seen = 0
        for row in rows {
            let ad = row["ad_id"]?.stringValue ?? ""
            var lower = from
            var upper = to
            if let size = bucketMicroseconds, let start = row["bucket_start"]?.stringValue.flatMap(Timestamp.init(rfc3339:)) {
                lower = max(start, from ?? start)
                let end = start.adding(microseconds: size)
                upper = min(end, to ?? end)
            }
            let owner = try connection.query("SELECT advertiser_id FROM ads WHERE ad_id = $1", [ad]).first?.decode(String.self, at: 0)
            #expect(row["advertiser_id"]?.stringValue == owner && (advertiser == nil || owner == advertiser),
                    "row \(ad) names advertiser \(row["advertiser_id"].map { "\($0)" } ?? "nil")", sourceLocation: sourceLocation)
            let sql = try sqlCounts(ad, from: lower, to: upper)
            #expect(Self.counts(row) == sql, "row \(ad) \(row["bucket_start"].map { "\($0)" } ?? "") differs from SQL",
                    sourceLocation: sourceLocation)
            seen += Int(sql.impressions + sql.clicks + sql.duplicateImpressions + sql.rejectedImpressions + sql.duplicateClicks + sql.rejectedClicks)
        }
        // Every event of the range (and advertiser) is in some row.
        let total = try connection.query("""
            SELECT count(*)::bigint FROM events e LEFT JOIN ads a ON a.ad_id = e.ad_id
            WHERE ($1::timestamptz IS NULL OR e.received_at >= $1) AND ($2::timestamptz IS NULL OR e.received_at < $2)
              AND ($3::text IS NULL OR a.advertiser_id = $3)
            """, [from, to, advertiser]).first?.decode(Int64.self, at: 0) ?? -1
        #expect(Int64(seen) == total, "rows cover \(seen) events, SQL has \(total)", sourceLocation: sourceLocation)
    }

    static func counts(_ value: JSONValue) -> ReportCounts {
        func n(_ key: String) -> Int64 { value[key]?.numberValue?.int64 ?? -1 }
        return ReportCounts(impressions: n("impressions"), clicks: n("clicks"), duplicateImpressions: n("duplicate_impressions"),
                            rejectedImpressions: n("rejected_impressions"), duplicateClicks: n("duplicate_clicks"),
                            rejectedClicks: n("rejected_clicks"))
    }

    static func time(_ text: String) -> Timestamp { Timestamp(rfc3339: text)! }
}
