@testable import AdTally
import AdTallyApp
import Foundation
import JSON
import Postgres
import TestSupport
import Testing
import Timestamps

/// Reports in time zones against the real PostgreSQL (API 1.3, section 3): every bucket of every
/// granularity equals a count over raw rows made here with the zone rules of PostgreSQL
/// (`AT TIME ZONE`, independent of the report's planning), before and after the folds and after
/// retention dropped the raw rows; the days of 23 and 25 hours, the repeated hour, months across a
/// change, and `final`.
@Suite(.timeLimit(.minutes(5))) struct ReportZoneTests {
    static let zones = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe"]
    static let day: Int64 = 86_400_000_000

    static func t(_ text: String) -> Timestamp { ReportFixture.time(text) }
    static func q(_ time: Timestamp) -> String { LifecycleTests.escape(time.rfc3339Microseconds) }

    /// Every event of the test, kept apart from `events` (whose rows retention drops), as the
    /// reference the reports are checked against.
    static func keepReference(_ r: ReportFixture) throws {
        try r.connection.execute("DROP TABLE IF EXISTS reference_events")
        try r.connection.execute("CREATE TABLE reference_events AS SELECT ad_id, type, status, reason, received_at FROM events")
    }

    /// The local key of an instant (a column or a parameter) for a granularity, in SQL.
    static func key(_ granularity: String, _ instant: String) -> String {
        switch granularity {
        case "day": return "to_char(\(instant) AT TIME ZONE $1::text, 'YYYY-MM-DD')"
        case "month": return "to_char(\(instant) AT TIME ZONE $1::text, 'YYYY-MM')"
        case "hour":
            return "to_char(\(instant) AT TIME ZONE $1::text, 'YYYY-MM-DD HH24') || ' ' || extract(epoch FROM (\(instant) AT TIME ZONE $1::text) - (\(instant) AT TIME ZONE 'UTC'))::bigint"
        default: return "left($1::text, 0)"
        }
    }

    /// The counts per ad and local key over `[from, to)`, from the reference rows: the 6 totals,
    /// then every reason, by name.
    static func reference(_ r: ReportFixture, zone: String, granularity: String, from: Timestamp?, to: Timestamp?) throws -> [String: [String: Int64]] {
        var result: [String: [String: Int64]] = [:]
        for row in try r.connection.query("""
            SELECT ad_id, \(key(granularity, "received_at")), type, status, coalesce(reason, ''), count(*)::bigint FROM reference_events
            WHERE ($2::timestamptz IS NULL OR received_at >= $2) AND ($3::timestamptz IS NULL OR received_at < $3)
            GROUP BY 1, 2, 3, 4, 5
            """, [zone, from, to]).rows {
            let id = "\(try row.decode(String.self, at: 0))|\(try row.decode(String.self, at: 1))"
            let type = try row.decode(String.self, at: 2), status = try row.decode(String.self, at: 3)
            let reason = try row.decode(String.self, at: 4), n = try row.decode(Int64.self, at: 5)
            var counts = result[id] ?? [:]
            let total = (type, status)
            let name: String
            switch total {
            case ("impression", "accepted"): name = "impressions"
            case ("click", "accepted"): name = "clicks"
            case ("impression", "duplicate"): name = "duplicate_impressions"
            case ("impression", "rejected"): name = "rejected_impressions"
            case ("click", "duplicate"): name = "duplicate_clicks"
            default: name = "rejected_clicks"
            }
            counts[name, default: 0] += n
            if !reason.isEmpty { counts[(status == "duplicate" ? "duplicates." : "rejections.") + reason, default: 0] += n }
            result[id] = counts
        }
        return result
    }

    /// Checks a listing's rows, each against the reference counts of its ad and bucket, and that
    /// every reference bucket is listed.
    static func expectListing(_ r: ReportFixture, _ body: JSONValue, zone: String, granularity: String, from: Timestamp?, to: Timestamp?,
                              _ comment: String, only: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws {
        var expected = try reference(r, zone: zone, granularity: granularity, from: from, to: to)
        if let only { expected = expected.filter { $0.key.hasPrefix(only + "|") } }
        var seen: Set<String> = []
        let rows = body["rows"]?.arrayValue ?? []
        for row in rows {
            // The single-ad report of an ad with nothing in the range lists zeros: no bucket.
            if only != nil, ReportFixture.counts(row) == ReportCounts() { continue }
            let ad = row["ad_id"]?.stringValue ?? "?"
            var bucketKey = ""
            if granularity != "total" {
                guard let text = row["bucket_start"]?.stringValue, let start = Timestamp(rfc3339: text) else {
                    Issue.record("\(comment): a row without bucket_start", sourceLocation: sourceLocation)
                    continue
                }
                bucketKey = try r.connection.query("SELECT \(key(granularity, "$2::timestamptz"))", [zone, start]).first?.decode(String.self, at: 0) ?? ""
                if zone == "UTC" { #expect(text.hasSuffix("Z"), sourceLocation: sourceLocation) }
            }
            let id = "\(ad)|\(bucketKey)"
            #expect(!seen.contains(id), "\(comment): bucket \(id) listed twice", sourceLocation: sourceLocation)
            seen.insert(id)
            let want = expected[id] ?? [:]
            var got: [String: Int64] = [:]
            for name in ["impressions", "clicks", "duplicate_impressions", "rejected_impressions", "duplicate_clicks", "rejected_clicks"] {
                if let n = row[name]?.numberValue?.int64, n != 0 { got[name] = n }
            }
            for (group, reasons) in [("rejections", CountColumn.rejectionReasons), ("duplicates", CountColumn.duplicateReasons)] {
                #expect(row[group]?.objectValue?.count == reasons.count, sourceLocation: sourceLocation)
                for reason in reasons {
                    if let n = row[group]?[reason.rawValue]?.numberValue?.int64, n != 0 { got["\(group).\(reason.rawValue)"] = n }
                }
            }
            #expect(got == want, "\(comment): \(id)", sourceLocation: sourceLocation)
        }
        #expect(seen == Set(expected.keys), "\(comment): listed \(seen.count) buckets, the reference has \(expected.count)",
                sourceLocation: sourceLocation)
    }

    /// Events at random instants over two 60-day windows around the spring and autumn changes of
    /// New York, Berlin and Lord Howe, of 10 ads (7 registered), every outcome and reason.
    static func loadRandomEvents(_ r: ReportFixture, count: Int, using generator: inout SystemRandomNumberGenerator) throws {
        let windows = [(t("2026-02-20T00:00:00Z"), t("2026-04-21T00:00:00Z")), (t("2026-09-20T00:00:00Z"), t("2026-11-19T00:00:00Z"))]
        for i in 0..<7 { try r.ad("ad-\(i)", advertiser: "adv-\(i % 2)") }
        let outcomes: [(String, String, String?)] = [
            ("impression", "accepted", nil), ("click", "accepted", nil), ("impression", "duplicate", "impression_already_counted"),
            ("click", "duplicate", "click_within_window"), ("click", "duplicate", "simultaneous_click"),
            ("impression", "rejected", "not_viewable"), ("impression", "rejected", "ad_not_served"), ("click", "rejected", "ad_not_in_feed"),
            ("click", "rejected", "stale_snapshot"), ("click", "rejected", "position_mismatch"), ("click", "rejected", "no_impression"),
            ("click", "rejected", "click_limit_exceeded"), ("impression", "rejected", "bot_agent"), ("click", "rejected", "blocked_address"),
        ]
        var ads: [String] = [], types: [String] = [], statuses: [String] = [], reasons: [String?] = [], times: [Int64?] = []
        for index in 0..<count {
            let (lo, hi) = windows[index % 2]
            var at = Int64.random(in: lo.microsecondsSinceEpoch..<hi.microsecondsSinceEpoch, using: &generator)
            // A few exactly on quarter and hour boundaries, where off-by-one errors live.
            if index % 17 == 0 { at -= at % (15 * 60_000_000) }
            if index % 29 == 0 { at -= at % 3_600_000_000 }
            let outcome = outcomes.randomElement(using: &generator) ?? outcomes[0]
            ads.append("ad-\(Int.random(in: 0..<10, using: &generator))")
            types.append(outcome.0)
            statuses.append(outcome.1)
            reasons.append(outcome.2)
            times.append(at)
        }
        try r.connection.query("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at)
            SELECT 's-' || o, gen_random_uuid(), t, a, s, re, at, at
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) WITH ORDINALITY AS u(a, t, s, re, at, o)
            """, [PostgresBinaryArray.text(ads), PostgresBinaryArray.text(types), PostgresBinaryArray.text(statuses),
                  PostgresBinaryArray.text(reasons), PostgresBinaryArray.timestamptz(microsecondsSinceUnixEpoch: times)])
        try keepReference(r)
    }

    /// Random bounds in the windows: whole hours, quarter hours, or microseconds.
    static func bounds(_ kind: Int, using generator: inout SystemRandomNumberGenerator) -> (Timestamp?, Timestamp?) {
        let windows = [(t("2026-02-18T00:00:00Z"), t("2026-04-23T00:00:00Z")), (t("2026-09-18T00:00:00Z"), t("2026-11-21T00:00:00Z"))]
        let (lo, hi) = windows.randomElement(using: &generator) ?? windows[0]
        var values = [Int64.random(in: lo.microsecondsSinceEpoch..<hi.microsecondsSinceEpoch, using: &generator),
                      Int64.random(in: lo.microsecondsSinceEpoch..<hi.microsecondsSinceEpoch, using: &generator)].sorted()
        // At most 10,000 hours apart, as granularity=hour allows (the windows are shorter anyway).
        switch kind {
        case 0: values = values.map { $0 - $0 % 3_600_000_000 }
        case 1: values = values.map { $0 - $0 % 900_000_000 }
        default: break
        }
        return (Timestamp(microsecondsSinceEpoch: values[0]), Timestamp(microsecondsSinceEpoch: values[1]))
    }

    /// Every zone, granularity and kind of bound, `rounds` times each, listing and single-ad report.
    static func checkEverything(_ r: ReportFixture, rounds: Int, boundKinds: [Int], _ when: String,
                                using generator: inout SystemRandomNumberGenerator) async throws {
        for zone in zones {
            for granularity in ["total", "hour", "day", "month"] {
                for kind in boundKinds {
                    for round in 0..<rounds {
                        var (from, to) = bounds(kind, using: &generator)
                        if granularity != "hour" && round == 0 && kind == boundKinds[0] { (from, to) = (nil, nil) }
                        let range = [from.map { "from=\(q($0))" }, to.map { "to=\(q($0))" }].compactMap { $0 }.joined(separator: "&")
                        let advertiser = round % 2 == 1 ? "&advertiser_id=adv-\(round % 4 / 2)" : ""
                        let response = await r.get("/v1/reports/ads?\(range)&granularity=\(granularity)&tz=\(zone)\(advertiser)")
                        #expect(response.status == 200, "\(when) \(zone) \(granularity): \(response.text)")
                        #expect(response.json["tz"]?.stringValue == zone)
                        if advertiser.isEmpty {
                            try expectListing(r, response.json, zone: zone, granularity: granularity, from: from, to: to,
                                              "\(when) \(zone) \(granularity) \(range)")
                        }
                        if granularity == "total" {
                            let ad = "ad-\(Int.random(in: 0..<10, using: &generator))"
                            let single = await r.get("/v1/reports/ads/\(ad)?\(range)&tz=\(zone)")
                            #expect(single.json["tz"]?.stringValue == zone)
                            let listed = JSONValue.object(["rows": .array(single.json.objectValue.map { [JSONValue.object($0)] } ?? [])])
                            try expectListing(r, listed, zone: zone, granularity: "total", from: from, to: to, "\(when) \(ad) \(range)",
                                              only: ad)
                        }
                    }
                }
            }
        }
    }

    @Test func everyBucketOfEveryZoneEqualsTheRawCountBeforeAndAfterFoldsAndRetention() async throws {
        var generator = SystemRandomNumberGenerator()
        let r = try ReportFixture()
        // Daily partitions over the windows, so that retention can drop them: from the day the
        // rollups restart, however long ago that fixed day is when the test runs.
        let since = (PostgresTimestamp.microseconds(of: Date()) - Self.t("2026-02-15T00:00:00Z").microsecondsSinceEpoch) / ReportSpans.day + 1
        try LifecycleTests.dailyPartitionsFrom(daysAgo: Int(since), on: r.connection)
        try r.connection.execute("SELECT adtally_restart_rollups('2026-02-15T00:00:00Z')")
        try Self.loadRandomEvents(r, count: 3_000, using: &generator)
        try await Self.checkEverything(r, rounds: 2, boundKinds: [0, 1, 2], "raw", using: &generator)

        // Folded: quarters and the days of every zone's phases.
        for zone in Self.zones { try Rollups.registerZone(zone, on: r.connection) }
        #expect(try r.connection.query("SELECT count(*) FROM rollup_day_phases").first?.decode(Int.self, at: 0) ?? 0 >= 9)
        _ = try await offThePool { try LifecycleTests.foldAll(r.connection) }
        #expect(try r.connection.query("SELECT count(*) FROM ad_day_counts WHERE phase = 1110").first?.decode(Int.self, at: 0) ?? 0 > 0)
        try await Self.checkEverything(r, rounds: 2, boundKinds: [0, 1, 2], "folded", using: &generator)

        // Retention drops every partition before now - 8 days: bounds on quarter hours stay exact.
        let maintenance = Maintenance(settings: .init(eventsRetentionDays: 8, sessionTTLDays: 3_650, budget: 120, limit: .configured))
        let report = await offThePool { maintenance.run(on: r.connection) }
        #expect(report.result == .ok, "\(report.error ?? "")")
        #expect(try r.connection.query("SELECT count(*) FROM events WHERE received_at < '2026-11-20T00:00:00Z'").first?.decode(Int.self, at: 0) == 0)
        // The unregistered ads (ad-7, ad-8, ad-9) went with their raw rows: the reference forgets them too.
        try r.connection.execute("DELETE FROM reference_events WHERE ad_id NOT IN (SELECT ad_id FROM ads)")
        try await Self.checkEverything(r, rounds: 2, boundKinds: [0, 1], "after retention", using: &generator)
    }

    /// A report's bounds need not be on quarter hours, but a zone's changes are: the rules read for
    /// a range that starts at 00:19:44.531170 put New York's spring change at 07:00, not at the
    /// bound's time of day plus quarter hours (07:04:44, which made that hour two buckets), and
    /// Lord Howe's half-hour change at its half hour.
    @Test func zoneChangesAreFoundOnTheirQuarterHourWhateverTheBounds() throws {
        let connection = try TestDatabase.create().connect()
        let lower = Self.t("2026-03-06T00:19:44.531170Z").microsecondsSinceEpoch
        let upper = Self.t("2026-04-17T10:03:43.527424Z").microsecondsSinceEpoch
        let zones: [(String, String)] = [("America/New_York", "2026-03-08T07:00:00Z"), ("Australia/Lord_Howe", "2026-04-04T15:00:00Z"),
                                         ("Europe/Berlin", "2026-03-29T01:00:00Z")]
        let shifts: [Int64] = [0, 1, 7 * 60_000_000 + 13, 86_399_999_999]
        for (zone, change) in zones {
            for shift in shifts {
                let query = KnownZones.rulesQuery(zone: try #require(ZoneName(zone)), lower: lower + shift, upper: upper)
                let rules = try KnownZones.rules(from: try connection.query(query))
                let changes: [Int64] = Array(rules.starts.dropFirst())
                #expect(changes == [Self.t(change).microsecondsSinceEpoch], "\(zone), bound + \(shift) µs: \(changes)")
            }
        }
    }

    @Test func newYorksDaysOf23And25HoursTheRepeatedHourAndMonths() async throws {
        let r = try ReportFixture()
        try r.ad("ad-ny", advertiser: "acme")
        // 2026-03-08 (23 hours: 05:00Z to 04:00Z) and 2026-11-01 (25 hours: 04:00Z to 05:00Z).
        for (at, session) in [("2026-03-08T05:00:00Z", "a"), ("2026-03-09T03:59:59.999999Z", "b"), ("2026-03-09T04:00:00Z", "c"),
                              ("2026-11-01T04:00:00Z", "d"), ("2026-11-01T05:30:00Z", "e"), ("2026-11-01T06:30:00Z", "f"),
                              ("2026-11-01T06:45:00Z", "g"), ("2026-11-02T04:59:59Z", "h"), ("2026-11-02T05:00:00Z", "i")] {
            try r.insert("ad-ny", "impression", "accepted", at: at, session: session)
        }
        func rows(_ query: String) async -> [(String, Int64)] {
            let body = await r.get("/v1/reports/ads?\(query)&tz=America/New_York").json
            return (body["rows"]?.arrayValue ?? []).map { ($0["bucket_start"]?.stringValue ?? "", $0["impressions"]?.numberValue?.int64 ?? -1) }
        }
        let days = await rows("granularity=day")
        #expect(days.map(\.0) == ["2026-03-08T00:00:00.000-05:00", "2026-03-09T00:00:00.000-04:00",
                                  "2026-11-01T00:00:00.000-04:00", "2026-11-02T00:00:00.000-05:00"])
        #expect(days.map(\.1) == [2, 1, 5, 1])
        // The repeated 01:00 is two buckets, told apart by their offsets.
        let hours = await rows("granularity=hour&from=2026-11-01T04:00:00Z&to=2026-11-01T08:00:00Z")
        #expect(hours.map(\.0) == ["2026-11-01T00:00:00.000-04:00", "2026-11-01T01:00:00.000-04:00", "2026-11-01T01:00:00.000-05:00"])
        #expect(hours.map(\.1) == [1, 1, 2])
        // Months across the changes.
        let months = await rows("granularity=month")
        #expect(months.map(\.0) == ["2026-03-01T00:00:00.000-05:00", "2026-11-01T00:00:00.000-04:00"])
        #expect(months.map(\.1) == [3, 6])
        // The same after the folds (the days of both of New York's phases).
        try Rollups.registerZone("America/New_York", on: r.connection)
        _ = try await offThePool { try LifecycleTests.foldAll(r.connection) }
        #expect(await rows("granularity=day").map(\.1) == [2, 1, 5, 1])
        #expect(await rows("granularity=hour&from=2026-11-01T04:00:00Z&to=2026-11-01T08:00:00Z").map(\.1) == [1, 1, 2])
        #expect(await rows("granularity=month").map(\.1) == [3, 6])
        // Unknown zones are refused, naming tz.
        for bad in ["Mars/Olympus", "utc", "Asia/Kolkata%20", "../etc"] {
            let refused = await r.get("/v1/reports/ads?tz=\(bad)")
            #expect(refused.status == 400 && refused.errorField == "tz", "\(bad)")
            #expect(await r.get("/v1/reports/ads/ad-ny?tz=\(bad)").errorField == "tz")
        }
    }

    /// A range that starts weeks after the clocks changed: its first month began before the change,
    /// and that month's start is written with the offset in force then, not the one at `from`.
    @Test func aMonthThatBeganBeforeAChangeStartsWithItsOwnOffset() async throws {
        let r = try ReportFixture()
        try r.ad("ad-ny", advertiser: "acme")
        try r.insert("ad-ny", "impression", "accepted", at: "2026-03-30T12:00:00Z", session: "a")
        try r.insert("ad-ny", "impression", "accepted", at: "2026-04-02T12:00:00Z", session: "b")
        try r.insert("ad-ny", "impression", "accepted", at: "2026-11-20T12:00:00Z", session: "c")
        func starts(_ query: String) async -> [String] {
            let body = await r.get("/v1/reports/ads?\(query)&tz=America/New_York").json
            return (body["rows"]?.arrayValue ?? []).map { $0["bucket_start"]?.stringValue ?? "" }
        }
        #expect(await starts("granularity=month&from=2026-03-29T11:45:00Z&to=2026-04-05T07:15:00Z")
                == ["2026-03-01T00:00:00.000-05:00", "2026-04-01T00:00:00.000-04:00"])
        #expect(await starts("granularity=month&from=2026-11-20T00:00:00Z&to=2026-11-21T00:00:00Z") == ["2026-11-01T00:00:00.000-04:00"])
    }

    @Test func finalFlipsWhenFinalBeforePassesTheBucketsEnd() async throws {
        let r = try ReportFixture()
        let f = r.store
        try f.feed("s1", "feed-1", [StoreFixture.ad("ad-1", 0)])
        try r.insert("ad-1", "impression", "accepted", at: "2026-11-29T10:20:00Z", session: "x")
        // A batch received at 11:20 holds final_before there while it is open.
        let held = Self.t("2026-11-29T11:20:00Z")
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        _ = try f.events.ingest([StoreFixture.event(.click, "s1", "ad-1")], receivedAt: .fixed(held), inOpenTransactionOn: holder)
        func finals(_ query: String) async -> [Bool] {
            let body = await r.get("/v1/reports/ads?\(query)").json
            return (body["rows"]?.arrayValue ?? []).map { $0["final"] == .bool(true) }
        }
        #expect(await finals("granularity=hour&from=2026-11-29T10:00:00Z&to=2026-11-29T12:00:00Z") == [true])
        #expect(await finals("from=2026-11-29T10:00:00Z&to=2026-11-29T11:00:00Z") == [true])
        #expect(await finals("from=2026-11-29T10:00:00Z&to=2026-11-29T11:30:00Z") == [false])
        #expect(await finals("from=2026-11-29T10:00:00Z") == [false])
        // A bucket clipped to `to`: final when `to` is.
        #expect(await finals("granularity=day&from=2026-11-29T10:00:00Z&to=2026-11-29T11:10:00Z") == [true])
        #expect(await r.get("/v1/reports/ads/ad-1?from=2026-11-29T10:00:00Z&to=2026-11-29T11:30:00Z").json["final"] == .bool(false))
        try holder.execute("COMMIT")
        #expect(await finals("granularity=hour&from=2026-11-29T10:00:00Z&to=2026-11-29T12:00:00Z") == [true, true])
        #expect(await finals("from=2026-11-29T10:00:00Z&to=2026-11-29T11:30:00Z") == [true])
        #expect(await r.get("/v1/reports/ads/ad-1?from=2026-11-29T10:00:00Z&to=2026-11-29T11:30:00Z").json["final"] == .bool(true))
        #expect(await r.get("/v1/reports/ads/ad-1").json["final"] == .bool(false))
    }
}
