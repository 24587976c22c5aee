@testable import AdTally
import Contract
import Dispatch
import Foundation
import Postgres
import Synchronization
import Testing
import Timestamps

/// API 1.3's rules against a client that misbehaves on purpose: a click needs an impression, a
/// session's clicks are limited per clock hour, filtered traffic is refused and stored, and an event
/// id is scoped to its session. Against the real PostgreSQL, with the rules' defaults.
@Suite(.timeLimit(.minutes(5))) struct InvalidTrafficTests {
    typealias F = StoreFixture

    /// The defaults of API 1.3: grace 30 s, tap window 1 s, a click needs an impression, 20 clicks
    /// a session and hour.
    static func fixture() throws -> F {
        try F(clickGraceSeconds: 30, tapWindowMilliseconds: 1_000, clickNeedsImpression: true, sessionClickLimit: 20)
    }

    static let ads = (0..<50).map { F.ad("ad-\($0)", Int32($0 * 4)) }

    /// The measured attack: one session clicks every ad of its feed, round after round, each
    /// round past the click window, each click 1.1 s after the one before.
    static func clickEveryAd(_ f: F, rounds: Int, occurredAt start: inout Timestamp) throws -> [EventOutcome] {
        var outcomes: [EventOutcome] = []
        for _ in 0..<rounds {
            for ad in ads {
                start = start.adding(microseconds: 1_100_000)
                outcomes.append(try f.send(F.event(.click, "s1", ad.adID, occurredAt: start)))
            }
            f.clock.advance(seconds: 31)
        }
        return outcomes
    }

    @Test func clicksWithoutImpressionsBillNothing() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", Self.ads)
        var occurredAt = F.start
        let outcomes = try Self.clickEveryAd(f, rounds: 3, occurredAt: &occurredAt)
        #expect(outcomes.count == 150)
        #expect(outcomes.allSatisfy { $0 == .rejected(.noImpression) })
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 0)
    }

    @Test func aSessionBillsAtMostItsLimitAnHourAndAgainTheNextHour() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", Self.ads)
        // Every ad seen: each impression counts once.
        let seen = try f.send(Self.ads.map { F.event(.impression, "s1", $0.adID) })
        #expect(seen.allSatisfy { $0 == .accepted })
        var occurredAt = F.start
        // 2026-11-29T13:47:00Z: three rounds take 93 s, all within the 13:00 hour.
        let outcomes = try Self.clickEveryAd(f, rounds: 3, occurredAt: &occurredAt)
        #expect(outcomes.filter { $0 == .accepted }.count == 20)
        #expect(outcomes.filter { $0 == .rejected(.clickLimitExceeded) }.count == 130)
        #expect(Array(outcomes.prefix(20)).allSatisfy { $0 == .accepted })

        // The next UTC clock hour (14:00): up to 20 again.
        f.clock.set(Timestamp(rfc3339: "2026-11-29T14:00:00Z") ?? F.start)
        let next = try Self.clickEveryAd(f, rounds: 1, occurredAt: &occurredAt)
        #expect(next.filter { $0 == .accepted }.count == 20)
        #expect(next.filter { $0 == .rejected(.clickLimitExceeded) }.count == 30)
        #expect(try f.count("SELECT count(*) FROM events WHERE type = 'click' AND status = 'accepted'") == 40)
        #expect(try f.count("SELECT clicks_in_hour FROM sessions WHERE session_id = 's1'") == 20)
    }

    @Test func aBatchCountsItsOwnClicksTowardTheLimit() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", Self.ads)
        _ = try f.send(Self.ads.map { F.event(.impression, "s1", $0.adID) })
        var at = F.start
        let clicks = Self.ads.prefix(25).map { ad -> EventInput in
            at = at.adding(microseconds: 1_100_000)
            return F.event(.click, "s1", ad.adID, occurredAt: at)
        }
        let outcomes = try f.send(clicks)
        #expect(outcomes.prefix(20).allSatisfy { $0 == .accepted })
        #expect(outcomes.suffix(5).allSatisfy { $0 == .rejected(.clickLimitExceeded) })
    }

    @Test func anImpressionEarlierInTheRequestCountsAndOneAfterTheClickDoesNot() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 4)])
        #expect(try f.send([F.event(.impression, "s1", "ad-1"), F.event(.click, "s1", "ad-1")]) == [.accepted, .accepted])
        // Click first: refused, and the impression after it does not make it billable later.
        let click = F.event(.click, "s1", "ad-2", occurredAt: F.start.adding(microseconds: 5_000_000))
        #expect(try f.send([click, F.event(.impression, "s1", "ad-2")]) == [.rejected(.noImpression), .accepted])
        #expect(try f.send(click) == .rejected(.noImpression))
        // A rejected impression is no impression.
        try f.feed("s2", "feed-2", [F.ad("ad-3", 0)])
        #expect(try f.send([F.event(.impression, "s2", "ad-3", visibility: Visibility(fraction: 0.2, milliseconds: 500)),
                            F.event(.click, "s2", "ad-3")]) == [.rejected(.notViewable), .rejected(.noImpression)])
    }

    @Test func filteredTrafficIsRefusedStoredAndKeepsItsAnswerOnReplay() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        var bot = F.event(.impression, "s1", "ad-1")
        bot.trafficFilter = .botAgent
        var blocked = F.event(.impression, "s1", "ad-1")
        blocked.trafficFilter = .blockedAddress
        var clicked = F.event(.click, "s1", "ad-1")
        clicked.trafficFilter = .blockedAddress
        #expect(try f.send([bot, blocked, clicked]) == [.rejected(.botAgent), .rejected(.blockedAddress), .rejected(.blockedAddress)])
        // Stored with their outcome, and the session's impression is not used up.
        #expect(try f.count("SELECT count(*) FROM events WHERE reason IN ('bot_agent', 'blocked_address')") == 3)
        #expect(try f.send(F.event(.impression, "s1", "ad-1")) == .accepted)
        // The lists changed (the request is let through now): a replay keeps its first answer.
        var replay = bot
        replay.trafficFilter = nil
        #expect(try f.send(replay) == .rejected(.botAgent))
        // Rules 1 and 2 come first: a replay of an accepted event from a filtered request is its answer.
        let accepted = F.event(.impression, "s1", "ad-1", id: UUID().uuidString.lowercased())
        _ = try f.send(accepted)
        var filteredReplay = accepted
        filteredReplay.trafficFilter = .botAgent
        #expect(try f.send(filteredReplay) == .duplicate(.impressionAlreadyCounted))
    }

    @Test func anEventIDIsScopedToItsSession() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        try f.feed("s2", "feed-2", [F.ad("ad-1", 0)])
        let id = UUID().uuidString.lowercased()
        #expect(try f.send(F.event(.impression, "s1", "ad-1", id: id)) == .accepted)
        // The same id in another session is another event; in one batch, too.
        #expect(try f.send([F.event(.impression, "s2", "ad-1", id: id), F.event(.impression, "s1", "ad-1", id: id)])
                == [.accepted, .accepted])
        #expect(try f.count("SELECT count(*) FROM events") == 2)
        // The same session and id with another type is a conflict, not stored.
        #expect(try f.send(F.event(.click, "s1", "ad-1", id: id)) == .rejected(.eventIDConflict))
        #expect(try f.count("SELECT count(*) FROM event_ids") == 2)
    }

    @Test func theStoredEventOwnsItsIDInsideABatch() throws {
        // X (ad a3) is stored and accepted; a later batch holds X with ad a0, then X with a3 again:
        // the first is a conflict, the second an exact replay of the stored X (its answer).
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("a0", 0), F.ad("a3", 3)])
        let x = UUID().uuidString.lowercased()
        #expect(try f.send(F.event(.impression, "s1", "a3", id: x)) == .accepted)
        #expect(try f.send([F.event(.impression, "s1", "a0", id: x), F.event(.impression, "s1", "a3", id: x)])
                == [.rejected(.eventIDConflict), .accepted])
        // An id this batch stores itself: its first occurrence decides the repeats.
        let y = UUID().uuidString.lowercased()
        #expect(try f.send([F.event(.impression, "s1", "a0", id: y), F.event(.impression, "s1", "a3", id: y),
                            F.event(.impression, "s1", "a0", id: y)])
                == [.accepted, .rejected(.eventIDConflict), .accepted])
    }

    /// Two processes race a session's 20th and 21st clicks, 50 times: never more than 20 billed.
    @Test func twoProcessesNeverBillPastTheLimit() throws {
        for round in 0..<50 {
            let f = try Self.fixture()
            try f.feed("s1", "feed-1", Self.ads)
            _ = try f.send(Self.ads.map { F.event(.impression, "s1", $0.adID) })
            var at = F.start
            let first19 = Self.ads.prefix(19).map { ad -> EventInput in
                at = at.adding(microseconds: 1_100_000)
                return F.event(.click, "s1", ad.adID, occurredAt: at)
            }
            #expect(try f.send(first19).allSatisfy { $0 == .accepted })
            let racers = [F.event(.click, "s1", "ad-30", occurredAt: at.adding(microseconds: 2_000_000)),
                          F.event(.click, "s1", "ad-31", occurredAt: at.adding(microseconds: 4_000_000))]
            let outcomes = Mutex<[EventOutcome]>([])
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { racer in
                do {
                    let connection = try f.database.connect()
                    let outcome = try f.events.ingest([racers[racer]], receivedAt: .fixed(f.clock.now()), on: connection)
                    outcomes.withLock { $0 += outcome }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "round \(round)")
            let decided = outcomes.withLock { $0 }
            #expect(decided.filter { $0 == .accepted }.count == 1, "round \(round): \(decided)")
            #expect(decided.filter { $0 == .rejected(.clickLimitExceeded) }.count == 1, "round \(round): \(decided)")
            #expect(try f.count("SELECT count(*) FROM events WHERE type = 'click' AND status = 'accepted'") == 20)
        }
    }
}
