@testable import AdTally
import Foundation
import Postgres
import Runtime
import Testing
import Timestamps

/// Credits (API.md section 10) against a real PostgreSQL: what an adjustment matches, at most once
/// per event, idempotent by id, all or nothing, and kept through an erasure.
@Suite(.timeLimit(.minutes(5))) struct AdjustmentTests {
    typealias F = StoreFixture
    static let day = (from: ReportFixture.time("2026-11-29T00:00:00Z"), to: ReportFixture.time("2026-11-30T00:00:00Z"))
    static let noHorizon = Timestamp(microsecondsSinceEpoch: .min)

    static func request(_ id: String, sessions: [String]? = nil, ads: [String]? = nil, advertiser: String? = nil,
                        from: Timestamp = day.from, to: Timestamp = day.to) -> AdjustmentRequest {
        AdjustmentRequest(adjustmentID: id, reason: .sivt, note: "review", from: from, to: to, sessionIDs: sessions, adIDs: ads,
                          advertiserID: advertiser)
    }

    /// Accepted events per ad and type by direct SQL, of the given sessions (all when nil).
    static func accepted(_ f: F, sessions: [String]?) throws -> [String: (Int64, Int64)] {
        var result: [String: (Int64, Int64)] = [:]
        for row in try f.connection.query("""
            SELECT ad_id, count(*) FILTER (WHERE type = 'impression'), count(*) FILTER (WHERE type = 'click')
            FROM events WHERE status = 'accepted' AND ($1::text[] IS NULL OR session_id = ANY ($1::text[])) GROUP BY ad_id
            """, [sessions.map { PostgresArray($0) }]).rows {
            result[try row.decode(String.self, at: 0)] = (try row.decode(Int64.self, at: 1), try row.decode(Int64.self, at: 2))
        }
        return result
    }

    static func created(_ outcome: AdjustmentStore.Outcome) -> AdjustmentStore.Adjustment? {
        if case .created(let adjustment) = outcome { return adjustment }
        return nil
    }

    static func perAd(_ adjustment: AdjustmentStore.Adjustment?) -> [String: (Int64, Int64)] {
        var result: [String: (Int64, Int64)] = [:]
        for ad in adjustment?.ads ?? [] { result[ad.adID] = (ad.impressions, ad.clicks) }
        return result
    }

    static func same(_ a: [String: (Int64, Int64)], _ b: [String: (Int64, Int64)]) -> Bool {
        a.count == b.count && a.allSatisfy { key, value in b[key].map { $0 == value } ?? false }
    }

    @Test func creditsTheMatchedAcceptedEventsAtMostOnce() throws {
        let f = try F()
        try ErasureTests.traffic(f)
        let store = AdjustmentStore(limit: .configured)
        let first = Self.created(try store.make(Self.request("farm", sessions: ["s-1"]), horizon: Self.noHorizon, on: f.connection))
        let expected = try Self.accepted(f, sessions: ["s-1"])
        #expect(!expected.isEmpty)
        #expect(Self.same(Self.perAd(first), expected))
        #expect(first?.ads.map(\.adID) == first?.ads.map(\.adID).sorted())
        #expect(first?.ads.first { $0.adID == "ad-2" }?.advertiserID == "globex")
        #expect(first?.impressions == expected.values.reduce(0) { $0 + $1.0 })

        // A later adjustment of the whole ad credits only what the first did not.
        let second = Self.created(try store.make(Self.request("dispute", ads: ["ad-1"]), horizon: Self.noHorizon, on: f.connection))
        let all = try Self.accepted(f, sessions: nil)["ad-1"]
        let ofS1 = expected["ad-1"]
        #expect(second?.impressions == (all?.0 ?? 0) - (ofS1?.0 ?? 0))
        #expect(second?.clicks == (all?.1 ?? 0) - (ofS1?.1 ?? 0))
        #expect(try f.count("SELECT count(*) FROM credit_marks") == f.count("SELECT count(*) FROM events WHERE status = 'accepted' AND (session_id = 's-1' OR ad_id = 'ad-1')"))

        // The advertiser's filter: only its ads, and nothing credited twice.
        let third = Self.created(try store.make(Self.request("globex", advertiser: "globex"), horizon: Self.noHorizon, on: f.connection))
        #expect(third?.ads.allSatisfy { $0.advertiserID == "globex" } == true)
        #expect(third?.impressions == 0 && third?.clicks == 0)  // s-1's globex events were credited by "farm"
    }

    @Test func theSameRequestIsAnsweredAgainAndAnotherIsAConflict() throws {
        let f = try F()
        try ErasureTests.traffic(f)
        let store = AdjustmentStore(limit: .configured)
        let request = Self.request("r-1", sessions: ["s-1", "s-2"])
        let first = Self.created(try store.make(request, horizon: Self.noHorizon, on: f.connection))
        let marks = try f.count("SELECT count(*) FROM credit_marks")
        // The same ids in another order, repeated: the same request.
        let again = try store.make(Self.request("r-1", sessions: ["s-2", "s-1", "s-2"]), horizon: Self.noHorizon, on: f.connection)
        #expect(first != nil)
        #expect(again == first.map { .repeated($0) })
        #expect(try store.read("r-1", on: f.connection) == first)
        #expect(try store.make(Self.request("r-1", sessions: ["s-1"]), horizon: Self.noHorizon, on: f.connection) == .conflict)
        #expect(try f.count("SELECT count(*) FROM credit_marks") == marks)
        #expect(try store.read("no-such", on: f.connection) == nil)
    }

    @Test func rulesThatNeedTheDatabaseAreRefusedWithTheirField() throws {
        let f = try F()
        try ErasureTests.traffic(f)
        let store = AdjustmentStore(limit: .configured)
        let future = SystemClock().now().adding(microseconds: 3_600_000_000)
        #expect(throws: AdjustmentRequest.Invalid.self) {
            try store.make(Self.request("late", sessions: ["s-1"], to: future), horizon: Self.noHorizon, on: f.connection)
        }
        do {
            _ = try store.make(Self.request("late", sessions: ["s-1"], to: future), horizon: Self.noHorizon, on: f.connection)
        } catch let invalid as AdjustmentRequest.Invalid {
            #expect(invalid.field == "to")
        }
        do {
            _ = try store.make(Self.request("old", sessions: ["s-1"]), horizon: ReportFixture.time("2026-11-29T12:00:00Z"), on: f.connection)
            Issue.record("a from before the horizon was accepted")
        } catch let invalid as AdjustmentRequest.Invalid {
            #expect(invalid.field == "from")
        }
        #expect(try f.count("SELECT count(*) FROM adjustments") == 0)
        #expect(try f.count("SELECT count(*) FROM credit_marks") == 0)
    }

    @Test func nothingMatchedIsStillRecorded() throws {
        let f = try F()
        let made = Self.created(try AdjustmentStore(limit: .configured).make(Self.request("empty", ads: ["ad-0"]), horizon: Self.noHorizon, on: f.connection))
        #expect(made?.impressions == 0 && made?.clicks == 0 && made?.ads == [])
        #expect(try AdjustmentStore(limit: .configured).read("empty", on: f.connection) == made)
    }

    /// Small steps count what one large step counts (each boundary once).
    @Test func stepsOfAnySizeCreditTheSame() throws {
        let f = try F()
        try ErasureTests.traffic(f)
        var store = AdjustmentStore(limit: .configured)
        store.stepMicroseconds = 7 * 1_000_000
        let made = Self.created(try store.make(Self.request("steps", ads: ["ad-1", "ad-2", "ad-9"]), horizon: Self.noHorizon, on: f.connection))
        #expect(Self.same(Self.perAd(made), try Self.accepted(f, sessions: nil)))
    }

    /// A failure in a later step leaves nothing: no mark, no adjustment.
    @Test func aFailureInTheMiddleCreditsNothing() throws {
        let f = try F()
        try ErasureTests.traffic(f)  // events at 13:47 and 13:49
        // A constraint (Citus distributes it with the table, where a trigger is refused) that the
        // marks of the second step break.
        try f.connection.execute("ALTER TABLE credit_marks ADD CONSTRAINT fail_late CHECK (received_at <= '2026-11-29T13:48:00Z')")
        var store = AdjustmentStore(limit: .configured)
        store.stepMicroseconds = 60 * 1_000_000
        #expect(throws: PostgresError.self) {
            try store.make(Self.request("half", sessions: ["s-1"]), horizon: Self.noHorizon, on: f.connection)
        }
        #expect(try f.count("SELECT count(*) FROM credit_marks") == 0)
        #expect(try f.count("SELECT count(*) FROM adjustments") == 0)
    }

    /// An erasure keeps the credits: the marks follow the anonymous rows, and no later adjustment
    /// credits those events again.
    @Test func anErasureKeepsTheCreditsOfItsEvents() throws {
        let f = try F()
        try ErasureTests.traffic(f)
        let store = AdjustmentStore(limit: .configured)
        let farm = Self.created(try store.make(Self.request("farm", sessions: ["s-1"]), horizon: Self.noHorizon, on: f.connection))
        let marks = try f.count("SELECT count(*) FROM credit_marks WHERE adjustment_id = 'farm'")
        _ = try ErasureStore(limit: .configured).erase("s-1", on: f.connection)
        #expect(try f.count("SELECT count(*) FROM credit_marks WHERE adjustment_id = 'farm'") == marks)
        #expect(try f.count("""
            SELECT count(*) FROM credit_marks m JOIN events e ON e.session_id = m.session_id AND e.event_id = m.event_id
            WHERE m.adjustment_id = 'farm' AND e.session_id LIKE '#%' AND e.status = 'accepted'
            """) == marks)
        let later = Self.created(try store.make(Self.request("later", ads: ["ad-1", "ad-2"]), horizon: Self.noHorizon, on: f.connection))
        let all = try Self.accepted(f, sessions: nil)
        let total = all.values.reduce(Int64(0)) { $0 + $1.0 + $1.1 }
        #expect((farm?.impressions ?? 0) + (farm?.clicks ?? 0) + (later?.impressions ?? 0) + (later?.clicks ?? 0) == total)
        #expect(try store.read("farm", on: f.connection) == farm)
    }

    @Test func theCreditsReportListsAdjustmentsByCreationAndAd() throws {
        let f = try F()
        try ErasureTests.traffic(f)
        let store = AdjustmentStore(limit: .configured)
        let a = Self.created(try store.make(Self.request("b-first", sessions: ["s-1"]), horizon: Self.noHorizon, on: f.connection))
        let b = Self.created(try store.make(Self.request("a-second", sessions: ["s-2"]), horizon: Self.noHorizon, on: f.connection))
        let rows = try store.credits(from: nil, to: nil, advertiserID: nil, scope: .everyAdvertiser, on: f.connection)
        #expect(rows.map { "\($0.adjustmentID)/\($0.adID)" } == (a?.ads ?? []).map { "b-first/\($0.adID)" } + (b?.ads ?? []).map { "a-second/\($0.adID)" })
        #expect(try store.credits(from: nil, to: nil, advertiserID: "globex", scope: .everyAdvertiser, on: f.connection).map(\.adID) == ["ad-2"])
        // An advertiser's key: its ads' rows of every adjustment (here, of one over two advertisers), whether
        // it names itself or not; another advertiser's rows are refused, not filtered to nothing.
        let everyRow = try store.credits(from: nil, to: nil, advertiserID: nil, scope: .everyAdvertiser, on: f.connection)
        let ofGlobex = everyRow.filter { $0.advertiserID == "globex" }
        #expect(!ofGlobex.isEmpty && ofGlobex.count < everyRow.count)
        #expect(try store.credits(from: nil, to: nil, advertiserID: nil, scope: .advertiser("globex"), on: f.connection) == ofGlobex)
        #expect(try store.credits(from: nil, to: nil, advertiserID: "globex", scope: .advertiser("globex"), on: f.connection) == ofGlobex)
        #expect(throws: ReportScope.Forbidden(advertiserID: "acme")) {
            try store.credits(from: nil, to: nil, advertiserID: "acme", scope: .advertiser("globex"), on: f.connection)
        }
        if let created = b?.createdAt {
            #expect(try store.credits(from: created, to: nil, advertiserID: nil, scope: .everyAdvertiser, on: f.connection).allSatisfy { $0.adjustmentID == "a-second" })
            #expect(try store.credits(from: nil, to: created, advertiserID: nil, scope: .everyAdvertiser, on: f.connection).allSatisfy { $0.adjustmentID == "b-first" })
        }
    }
}

/// An adjustment in the middle of its steps holds its transaction open: event ingestion of the
/// same sessions and ads goes on beside it, and `final_before` is not held back by it.
@Suite(.timeLimit(.minutes(2))) struct AdjustmentConcurrencyTests {
    typealias F = StoreFixture

    @Test func aStepInProgressBlocksNeitherIngestionNorFinalBefore() throws {
        let f = try F()
        try ErasureTests.traffic(f)
        let open = try f.database.connect()
        try open.execute("BEGIN")
        _ = try open.query("SELECT pg_advisory_xact_lock(\(AdjustmentStore.creditLockKey))")
        let request = AdjustmentTests.request("open", sessions: ["s-1", "s-2"])
        let marked = try open.query(AdjustmentStore(limit: .configured).mark(request, from: request.from, to: request.to)).rows.count
        #expect(marked > 0)
        // Another connection: the same sessions' events are judged and stored at once.
        let other = try f.database.connect()
        other.answerTimeout = .seconds(5)
        let outcomes = try f.events.ingest([F.event(.impression, "s-1", "ad-1"), F.event(.click, "s-2", "ad-1")], receivedAt: .databaseClock, on: other)
        #expect(outcomes.count == 2)
        // final_before moves past the moment the adjustment began.
        let now = try other.query("SELECT adtally_clock()").first?.decode(Timestamp.self, at: 0)
        let finalBefore = try other.query("SELECT adtally_final_before()").first?.decode(Timestamp.self, at: 0)
        if let now, let finalBefore {
            #expect(finalBefore >= now)
        } else {
            Issue.record("the clock or final_before was not read")
        }
        try open.execute("ROLLBACK")
        #expect(try f.count("SELECT count(*) FROM credit_marks") == 0)
    }
}
