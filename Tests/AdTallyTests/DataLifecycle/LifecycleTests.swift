@testable import AdTally
import AdTallyApp
import Contract
import Dispatch
import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing
import Timestamps

/// The data lifecycle against the real PostgreSQL: rollups exact against raw counts while they
/// advance, the watermark, retention, forgetting idle sessions, and maintenance run by two
/// processes at once.
// Ten minutes: the random-range exactness test's 500 reports take over five on a loaded machine
// (CI beside two busy processes).
@Suite(.timeLimit(.minutes(10))) struct LifecycleTests {
    typealias F = StoreFixture

    /// Folds every event before final_before, and every day of every phase that can be folded now.
    @discardableResult
    static func foldAll(_ connection: PostgresConnection) throws -> Int {
        var folds = 0
        while let fold = try Rollups.foldRecent(statementTimeout: "60s", on: connection).fold {
            folds += 1
            if fold.caughtUp { break }
        }
        while let _ = try Rollups.foldNextDay(statementTimeout: "60s", on: connection).fold { folds += 1 }
        return folds
    }

    static func state(_ connection: PostgresConnection) throws -> LifecycleState { try LifecycleState.read(on: connection) }

    // MARK: Exactness

    @Test func rollupsEqualRawCountsForRandomRangesWhileTheyAdvance() async throws {
        // Four days of traffic played in seconds: the database's clock (adtally_clock) is shifted
        // back four days and moved forward batch by batch, for the ingesting connection and the
        // folding one alike (the folder never ahead of the ingester, as one clock would be).
        let r = try ReportFixture()
        let f = r.store
        // Daily partitions over the whole workload, so that ranges cross partition boundaries (a day
        // bucket never spans two: partitions are UTC days, as buckets are).
        try Self.dailyPartitionsFrom(daysAgo: 5, on: f.connection)
        let start = Date().addingTimeInterval(-4 * 86_400)
        let startMicroseconds = PostgresTimestamp.microseconds(of: start)
        let hourAligned = Timestamp(microsecondsSinceEpoch: startMicroseconds - startMicroseconds % ReportSpans.hour)
        try f.connection.query("SELECT adtally_restart_rollups($1)", [hourAligned])
        var sessions: [String] = []
        for s in 0..<6 {
            let session = "ex-\(s)"
            sessions.append(session)
            try f.feed(session, "feed-\(s)", (0..<6).map { F.ad("ad-\(($0 + s) % 8)", Int32($0 * 3), advertiser: "adv-\(($0 + s) % 8 % 2)") })
        }
        let ingest = try f.database.connect()
        let folder = try f.database.connect()
        let offset = Atomic<Int64>(-4 * 86_400 * 1_000_000)  // microseconds, published by the ingester
        let stop = Atomic<Bool>(false)
        let folded = Atomic<Int>(0)
        let passes = Atomic<Int>(0)
        let folding = DispatchSemaphore(value: 0)
        // A thread of its own, not a shared queue: it must run now, whatever other tests block.
        Thread {
            while !stop.load(ordering: .relaxed) {
                do {
                    try folder.query("SELECT set_config('adtally.clock_offset', $1, false)", ["\(offset.load(ordering: .relaxed)) microseconds"])
                    folded.add(try Self.foldAll(folder), ordering: .relaxed)
                    passes.add(1, ordering: .relaxed)
                } catch {
                    Issue.record("folding failed: \(error)")
                    break
                }
            }
            folding.signal()
        }.start()
        var generator = SystemRandomNumberGenerator()
        var sent: [EventInput] = []
        let store = EventStore(clickRule: ClickRule.configured(windowSeconds: 30, graceSeconds: 30, tapWindowMilliseconds: 1_000))
        for batch in 0..<160 {
            // 36 minutes a batch: 160 batches cover four days, every hour and both kinds of span.
            let now = offset.load(ordering: .relaxed) + Int64.random(in: 20...52, using: &generator) * 60 * 1_000_000
            try ingest.query("SELECT set_config('adtally.clock_offset', $1, false)", ["\(now) microseconds"])
            offset.store(now, ordering: .relaxed)
            let occurred = Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: Date()) + now)
            var events: [EventInput] = []
            for _ in 0..<Int.random(in: 1...12, using: &generator) {
                let session = sessions.randomElement(using: &generator) ?? "ex-0"
                let ad = "ad-\(Int.random(in: 0..<9, using: &generator))"  // ad-8 is never served
                let type: EventType = Bool.random(using: &generator) ? .impression : .click
                let visibility: Visibility? = type == .impression && Bool.random(using: &generator)
                    ? Visibility(fraction: Double.random(in: 0...1, using: &generator), milliseconds: Int32.random(in: 0...3_000, using: &generator)) : nil
                events.append(F.event(type, session, ad, snapshot: Bool.random(using: &generator) ? nil : "feed-x",
                                      visibility: visibility, occurredAt: occurred))
            }
            // Replays of earlier events ride along.
            if !sent.isEmpty, batch % 5 == 0 {
                events.append(contentsOf: (0..<3).compactMap { _ in sent.randomElement(using: &generator) })
            }
            _ = try store.ingest(events, receivedAt: .databaseClock, on: ingest)
            sent.append(contentsOf: events)
            // Every tenth batch, let the folder take two passes at the hours so far (a bounded
            // wait on its progress, not a sleep), so that folding and ingesting interleave.
            if batch % 10 == 9 {
                let seen = passes.load(ordering: .relaxed)
                #expect(ConcurrencyTests.eventually { passes.load(ordering: .relaxed) >= seen + 2 })
            }
        }
        stop.store(true, ordering: .relaxed)
        #expect(await offThePool { folding.wait(timeout: .now() + 60) == .success })
        try folder.query("SELECT set_config('adtally.clock_offset', $1, false)", ["\(offset.load(ordering: .relaxed)) microseconds"])
        try Self.foldAll(folder)
        #expect(folded.load(ordering: .relaxed) > 48, "the rollups hardly advanced while events came")

        // Reports read through the routes, with the folded state, at random microsecond bounds.
        let state = try Self.state(f.connection)
        #expect(state.foldedTo > hourAligned.adding(microseconds: 3 * 86_400 * 1_000_000))
        #expect((state.rollups.phases.first { $0.minutes == 0 }?.daysTo ?? 0) > hourAligned.adding(microseconds: 2 * 86_400 * 1_000_000).microsecondsSinceEpoch)
        let end = startMicroseconds + offset.load(ordering: .relaxed) + 4 * 86_400 * 1_000_000 + 3_600 * 1_000_000
        // 500 random ranges; 150 on a Citus cluster (scripts/check-citus), where every report
        // crosses nodes and the suite's time limit would otherwise go to the round trips.
        let rounds = try CitusDistributionTests.isCitus(f.connection) ? 150 : 500
        for round in 0..<rounds {
            var bounds = [Int64.random(in: startMicroseconds...end, using: &generator), Int64.random(in: startMicroseconds...end, using: &generator)].sorted()
            if round % 7 == 0 { bounds[0] -= bounds[0] % ReportSpans.hour }  // whole hours too
            let from = round % 11 == 0 ? nil : Timestamp(microsecondsSinceEpoch: bounds[0])
            let to = round % 13 == 0 ? nil : Timestamp(microsecondsSinceEpoch: bounds[1])
            let query = [from.map { "from=\(Self.escape($0.rfc3339Microseconds))" }, to.map { "to=\(Self.escape($0.rfc3339Microseconds))" }]
                .compactMap { $0 }.joined(separator: "&")
            let ad = "ad-\(round % 9)"
            let report = await r.get("/v1/reports/ads/\(ad)?\(query)")
            #expect(report.status == 200, "\(report.text)")
            try r.expectMatchesSQL(report.json, ad: ad, from: from, to: to)
            if round % 25 == 0 {
                for granularity in ["total", "day", "hour"] where granularity != "hour" || (from != nil && to != nil) {
                    let listing = await r.get("/v1/reports/ads?\(query)&granularity=\(granularity)&advertiser_id=adv-\(round % 2)")
                    #expect(listing.status == 200, "\(listing.text)")
                    try r.expectListingMatchesSQL(listing.json, from: from, to: to,
                                                  bucketMicroseconds: granularity == "day" ? ReportSpans.day : granularity == "hour" ? ReportSpans.hour : nil,
                                                  advertiser: "adv-\(round % 2)")
                }
            }
        }
        // Aligned bounds, where a listing reads a single rollup span (whole days by day, whole
        // hours by hour) or one rollup span beside raw rows, with and without the advertiser filter.
        let lastDay = Timestamp(microsecondsSinceEpoch: state.rollups.phases.first { $0.minutes == 0 }?.daysTo ?? 0)
        let aligned: [(Timestamp, Timestamp, String)] = [
            (lastDay.adding(microseconds: -2 * ReportSpans.day), lastDay, "day"),
            (lastDay.adding(microseconds: -2 * ReportSpans.day), lastDay, "total"),
            (lastDay.adding(microseconds: -5 * ReportSpans.hour), lastDay, "hour"),
            (lastDay.adding(microseconds: -ReportSpans.day), state.foldedTo.adding(microseconds: 1_234), "day"),
        ]
        for (from, to, granularity) in aligned {
            let query = "from=\(Self.escape(from.rfc3339Microseconds))&to=\(Self.escape(to.rfc3339Microseconds))&granularity=\(granularity)"
            let size = granularity == "day" ? ReportSpans.day : granularity == "hour" ? ReportSpans.hour : nil
            for advertiser in [nil, "adv-1"] as [String?] {
                let listing = await r.get("/v1/reports/ads?\(query)" + (advertiser.map { "&advertiser_id=\($0)" } ?? ""))
                #expect(listing.status == 200, "\(listing.text)")
                #expect((listing.json["rows"]?.arrayValue ?? []).count > 0, "\(query) listed nothing")
                try r.expectListingMatchesSQL(listing.json, from: from, to: to, bucketMicroseconds: size, advertiser: advertiser)
            }
        }
    }

    static func escape(_ text: String) -> String { text.replacingOccurrences(of: "+", with: "%2B") }

    // MARK: The watermark

    @Test func finalBeforeWaitsForATransactionHoldingEventsAndTheRollupsCountItOnce() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 1), F.ad("ad-3", 2)])
        // A transaction that stores events received at 11:20 stays open (as a slow batch would)...
        let held = F.start.adding(microseconds: -3 * 3_600 * 1_000_000 + 33 * 60 * 1_000_000)  // 11:20
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        #expect(try f.events.ingest([F.event(.impression, "s1", "ad-1"), F.event(.click, "s1", "ad-2")],
                                    receivedAt: .fixed(held), inOpenTransactionOn: holder) == [.accepted, .accepted])
        // ...while events of earlier hours are committed (on an ad whose row it does not hold).
        let earlier = F.start.adding(microseconds: -5 * 3_600 * 1_000_000)  // 08:47
        _ = try f.events.ingest([F.event(.impression, "s1", "ad-3")], receivedAt: .fixed(earlier), on: f.connection)
        try f.connection.execute("SELECT adtally_restart_rollups('2026-11-29T08:00:00Z')")

        // final_before does not pass the held transaction's instant, and the fold stops exactly there.
        let watcher = try f.database.connect()
        #expect(try Self.state(watcher).finalBefore == held)
        try Self.foldAll(watcher)
        #expect(try Self.state(watcher).foldedTo == held)
        #expect(try f.count("SELECT coalesce(sum(impressions + clicks), 0)::int FROM ad_quarter_counts") == 1)

        // Committed, its quarter folds, and counts it exactly once.
        try holder.execute("COMMIT")
        #expect(try Self.state(watcher).finalBefore > held)
        try Self.foldAll(watcher)
        #expect(try Self.state(watcher).foldedTo > held)
        #expect(try f.count("SELECT coalesce(sum(impressions + clicks), 0)::int FROM ad_quarter_counts") == 3)
        #expect(try f.count("SELECT coalesce(sum(impressions + clicks), 0)::int FROM ad_quarter_counts WHERE quarter = '2026-11-29T11:15:00Z'") == 2)
        try Self.foldAll(watcher)
        #expect(try f.count("SELECT coalesce(sum(impressions + clicks), 0)::int FROM ad_quarter_counts") == 3)
    }

    // MARK: Retention

    /// Replaces the legacy partition (empty in a new test database) with daily partitions from
    /// `daysAgo` days ago on, so that old days can age out as they do in production.
    static func dailyPartitionsFrom(daysAgo: Int, on connection: PostgresConnection) throws {
        // Two statements: Citus sends a DDL statement's text on to the workers, which refuse two commands in one.
        try connection.execute("ALTER TABLE events DETACH PARTITION events_legacy")
        try connection.execute("DROP TABLE events_legacy")
        try connection.query("""
            SELECT adtally_create_event_partition(d::date)
            FROM generate_series((now() AT TIME ZONE 'UTC')::date - $1::int, (now() AT TIME ZONE 'UTC')::date + 8, interval '1 day') AS d
            """, [daysAgo])
    }

    @Test func agedPartitionsAreDroppedAndWholeHourReportsStayTheSame() async throws {
        let r = try ReportFixture()
        let f = r.store
        try Self.dailyPartitionsFrom(daysAgo: 100, on: f.connection)
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 1)])
        let now = Date()
        func daysAgo(_ days: Double, hour: Int) -> Timestamp {
            let day = PostgresTimestamp.microseconds(of: now.addingTimeInterval(-days * 86_400))
            return Timestamp(microsecondsSinceEpoch: day - day % ReportSpans.day + Int64(hour) * ReportSpans.hour + 17 * 60 * 1_000_000)
        }
        let old = daysAgo(95, hour: 10), recent = daysAgo(20, hour: 14)
        for (instant, ad) in [(old, "ad-1"), (old, "ad-2"), (recent, "ad-1")] {
            _ = try f.events.ingest([F.event(.impression, "s1", ad), F.event(.click, "s1", ad)], receivedAt: .fixed(instant), on: f.connection)
        }
        let oldDay = Timestamp(microsecondsSinceEpoch: old.microsecondsSinceEpoch - old.microsecondsSinceEpoch % ReportSpans.day)
        try f.connection.query("SELECT adtally_restart_rollups($1)", [oldDay])
        try Self.foldAll(f.connection)
        let wholeHours = "from=\(oldDay.rfc3339)&to=\(daysAgo(1, hour: 0).adding(microseconds: -17 * 60 * 1_000_000).rfc3339)"
        let before = await r.get("/v1/reports/ads/ad-1?\(wholeHours)").textWithoutFinalBefore
        let listingBefore = await r.get("/v1/reports/ads?\(wholeHours)&granularity=day").textWithoutFinalBefore

        let maintenance = Maintenance(settings: .init(eventsRetentionDays: 90, sessionTTLDays: 3_650, limit: .configured))
        let report = maintenance.run(on: f.connection, now: now)
        #expect(report.result == .ok, "\(report.error ?? "")")
        let name = "events_p" + String(oldDay.rfc3339.prefix(10).filter(\.isNumber))
        #expect(report.partitionsDropped.contains(name), "\(report.partitionsDropped)")
        #expect(try f.count("SELECT count(*) FROM events WHERE received_at < $1", [daysAgo(90, hour: 0)]) == 0)
        #expect(try f.count("SELECT count(*) FROM events") == 2)
        #expect(report.oldestReceived == recent)
        // The counts outlive the raw rows.
        #expect(await r.get("/v1/reports/ads/ad-1?\(wholeHours)").textWithoutFinalBefore == before)
        #expect(await r.get("/v1/reports/ads?\(wholeHours)&granularity=day").textWithoutFinalBefore == listingBefore)
        let kept = await r.get("/v1/reports/ads/ad-1?\(wholeHours)").json
        #expect(kept["impressions"]?.numberValue?.int64 == 1)
        #expect(kept["duplicate_impressions"]?.numberValue?.int64 == 1)
        #expect(kept["clicks"]?.numberValue?.int64 == 2)
    }

    @Test func aBoundBeforeTheHorizonMustBeAWholeQuarterHour() async throws {
        let horizon = ReportFixture.time("2026-09-01T10:00:00Z")
        let r = try ReportFixture(horizon: horizon)
        for (query, field) in [("from=2026-08-01T10:00:00.5Z", "from"), ("to=2026-09-01T09:59:59Z", "to"),
                               ("from=2026-08-01T10:00:00Z&to=2026-08-02T10:20:00Z", "to")] {
            for path in ["/v1/reports/ads/ad-1", "/v1/reports/ads"] {
                let response = await r.get("\(path)?\(query)")
                #expect(response.status == 400, "\(path)?\(query)")
                #expect(response.errorCode == "invalid_query")
                #expect(response.errorField == field)
                #expect(response.json["error"]?["message"]?.stringValue?.contains("2026-09-01T10:00:00.000Z") == true)
            }
        }
        // Whole quarter hours before it, and anything after it, are fine.
        #expect(await r.get("/v1/reports/ads/ad-1?from=2026-08-01T10:45:00Z&to=2026-09-01T10:00:00.5Z").status == 200)
        #expect(await r.get("/v1/reports/ads?from=2026-08-01T10:15:00Z&to=2026-09-01T10:00:00.5Z").status == 200)
    }

    // MARK: Forgetting idle sessions

    @Test func anIdleSessionIsForgottenAndAnActiveOneIsNot() throws {
        let f = try F()
        // Both registered at the fixture's start; s-busy has an event 35 days later.
        try f.feed("s-idle", "feed-idle", [F.ad("ad-1", 0)])
        try f.feed("s-busy", "feed-busy", [F.ad("ad-1", 0)])
        #expect(try f.send(F.event(.impression, "s-idle", "ad-1")) == .accepted)
        let later = F.start.adding(microseconds: 35 * 86_400 * 1_000_000)
        _ = try f.events.ingest([F.event(.click, "s-busy", "ad-1")], receivedAt: .fixed(later), on: f.connection)
        let cutoff = Date(timeIntervalSince1970: Double(F.start.microsecondsSinceEpoch) / 1e6 + 31 * 86_400)
        #expect(try Retention.forgetIdleSessions(before: cutoff, budget: 10, on: f.connection) == 1)
        // Forgotten: as if it never existed; its ads are no longer served.
        #expect(try f.count("SELECT count(*) FROM sessions WHERE session_id = 's-idle'") == 0)
        #expect(try f.count("SELECT count(*) FROM session_ads WHERE session_id = 's-idle'") == 0)
        #expect(try f.count("SELECT count(*) FROM snapshots WHERE session_id = 's-idle'") == 0)
        #expect(try f.send(F.event(.impression, "s-idle", "ad-1")) == .rejected(.adNotServed))
        #expect(try f.send(F.event(.click, "s-idle", "ad-1")) == .rejected(.adNotInFeed))
        // Its snapshot id stays owned: another session cannot take it.
        #expect(try f.feed("s-other", "feed-idle", [F.ad("ad-1", 0)]) == .snapshotConflict)
        // The busy one is untouched, and its audit rows (and the idle one's) stay until retention.
        #expect(try f.send(F.event(.impression, "s-busy", "ad-1")) == .accepted)
        #expect(try f.count("SELECT count(*) FROM events WHERE session_id = 's-idle'") == 3)
        // Forgetting again leaves the active one alone.
        _ = try Retention.forgetIdleSessions(before: cutoff, budget: 10, on: f.connection)
        #expect(try f.count("SELECT count(*) FROM sessions WHERE session_id = 's-busy'") == 1)
    }

    @Test func aSessionThatBecameActiveUnderTheLockIsKept() throws {
        // Idle when picked, active by the time forgetting holds its row: the check under the lock wins.
        let f = try F()
        try f.feed("s-1", "feed-1", [F.ad("ad-1", 0)])
        let cutoff = Date(timeIntervalSince1970: Double(F.start.microsecondsSinceEpoch) / 1e6 + 31 * 86_400)
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        let later = F.start.adding(microseconds: 40 * 86_400 * 1_000_000)
        try EventPartitions.ensure(around: later, on: f.connection)
        _ = try f.events.ingest([F.event(.click, "s-1", "ad-1")], receivedAt: .fixed(later), inOpenTransactionOn: holder)
        let forgotten = try ConcurrencyTests.runBehindLock(f, {
            try Retention.forgetIdleSessions(before: cutoff, budget: 10, on: try f.database.connect())
        }, release: { try holder.execute("COMMIT") })
        #expect(forgotten == 0)
        #expect(try f.count("SELECT count(*) FROM sessions WHERE session_id = 's-1'") == 1)
    }

    // MARK: Maintenance

    /// Rollups caught up to now, as in a running service (the fixture starts them in January).
    static func rollupsFromNow(_ f: F) throws {
        try f.connection.execute("SELECT adtally_restart_rollups(now())")
    }

    @Test func whileOneProcessRunsMaintenanceAnotherSkipsAndEventsAreAnswered() throws {
        let f = try F()
        try Self.rollupsFromNow(f)
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let first = Maintenance(settings: .init(Configuration()), owner: "first")
        let second = Maintenance(settings: .init(Configuration()), owner: "second")
        // The first holds the lease (as while a run is under way).
        try f.connection.query("UPDATE lifecycle_state SET maintenance_owner = 'first', maintenance_until = clock_timestamp() + interval '1 minute'")
        let skipped = second.run(on: try f.database.connect())
        #expect(skipped.result == .skipped)
        #expect(skipped.steps.first?.first?.1 == .string("skipped"))
        // Events are answered meanwhile.
        #expect(try f.send(F.event(.impression, "s1", "ad-1")) == .accepted)
        // The holder itself works, and gives the lease back.
        let worked = first.run(on: try f.database.connect())
        #expect(worked.result == .ok, "\(worked.error ?? "")")
        #expect(try f.count("SELECT count(*) FROM lifecycle_state WHERE maintenance_until IS NULL") == 1)
        #expect(second.run(on: try f.database.connect()).result == .ok)
        // A lease left by a process that stopped expires.
        try f.connection.query("UPDATE lifecycle_state SET maintenance_owner = 'gone', maintenance_until = clock_timestamp() - interval '1 second'")
        #expect(second.run(on: try f.database.connect()).result == .ok)
    }

    @Test func twoProcessesRunningMaintenanceTogetherNeverFail() throws {
        let f = try F()
        try Self.rollupsFromNow(f)
        let results = Mutex<[Maintenance.Result]>([])
        for _ in 0..<10 {
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                do {
                    let report = Maintenance(settings: .init(Configuration()), owner: "p\(index)").run(on: try f.database.connect())
                    results.withLock { $0.append(report.result) }
                } catch {
                    Issue.record("\(error)")
                }
            }
        }
        let all = results.withLock { $0 }
        #expect(all.count == 20)
        #expect(!all.contains(.failed))
        #expect(all.contains(.ok))
    }

    @Test func anEventForADayWithoutAPartitionMakesIt() throws {
        // Maintenance never ran for a week: the batch makes the partition it needs rather than fail.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let farAhead = Timestamp(microsecondsSinceEpoch: PostgresTimestamp.microseconds(of: Date().addingTimeInterval(20 * 86_400)))
        #expect(try f.events.ingest([F.event(.impression, "s1", "ad-1")], receivedAt: .fixed(farAhead), on: f.connection) == [.accepted])
        #expect(try f.count("SELECT count(*) FROM events WHERE received_at = $1", [farAhead]) == 1)
    }
}

extension Timestamp {
    /// RFC 3339 with all six fraction digits (the contract's output has three), for query bounds.
    var rfc3339Microseconds: String {
        let extra = Int(microsecondsSinceEpoch % 1_000 + 1_000) % 1_000
        return String(rfc3339.dropLast()) + String(String(extra + 1_000).dropFirst()) + "Z"
    }
}
