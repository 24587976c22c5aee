import AdTally
import Foundation
import Postgres
import Testing
import Timestamps

/// The tap rule and the grace window through the real store and PostgreSQL, with the seed's own
/// scenarios: a cell reused for three ads whose three tap handlers fire at once, and a tap that
/// raced a feed refresh.
@Suite(.timeLimit(.minutes(5))) struct TapAndGraceTests {
    typealias F = StoreFixture
    static let t0 = F.start
    static func at(_ seconds: Double) -> Timestamp { t0.adding(microseconds: Int64((seconds * 1_000_000).rounded())) }

    /// The contract's defaults: grace 30 s, tap window 1 s, click window 30 s.
    static func fixture() throws -> F { try F(clickWindowSeconds: 30, clickGraceSeconds: 30, tapWindowMilliseconds: 1_000) }

    static func click(_ session: String, _ ad: String, snapshot: String? = nil, position: Int32? = nil, at occurredAt: Timestamp = t0) -> EventInput {
        F.event(.click, session, ad, snapshot: snapshot, position: position, occurredAt: occurredAt)
    }

    // MARK: One tap, one click, across ads

    @Test func thePileUpOfOneTapBillsItsFirstClickOnly() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("ad-a", 3), F.ad("ad-b", 4, advertiser: "globex"), F.ad("ad-c", 5, advertiser: "initech")])
        // One batch: the three handlers of one reused cell, in the same instant.
        #expect(try f.send([Self.click("s1", "ad-a"), Self.click("s1", "ad-b"), Self.click("s1", "ad-c")])
                == [.accepted, .duplicate(.simultaneousClick), .duplicate(.simultaneousClick)])
        // As three requests, in a second session: the same answers.
        try f.feed("s2", "feed-2", [F.ad("ad-a", 3), F.ad("ad-b", 4, advertiser: "globex"), F.ad("ad-c", 5, advertiser: "initech")])
        #expect(try f.send(Self.click("s2", "ad-a", at: Self.at(0.1))) == .accepted)
        #expect(try f.send(Self.click("s2", "ad-b", at: Self.at(0.1))) == .duplicate(.simultaneousClick))
        #expect(try f.send(Self.click("s2", "ad-c", at: Self.at(0.4))) == .duplicate(.simultaneousClick))
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 2)
        #expect(try f.count("SELECT count(*) FROM events WHERE reason = 'simultaneous_click'") == 4)
    }

    @Test func tapsOneAndAHalfSecondsApartAreTwoTaps() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("ad-a", 3), F.ad("ad-b", 4), F.ad("ad-c", 5)])
        #expect(try f.send([Self.click("s1", "ad-a"), Self.click("s1", "ad-b", at: Self.at(1.5)), Self.click("s1", "ad-c", at: Self.at(3))])
                == [.accepted, .accepted, .accepted])
        // Past ad-a's click window, a tap 1.5 s after the last accepted one (on ad-c) is another tap.
        f.clock.advance(seconds: 31)
        #expect(try f.send(Self.click("s1", "ad-a", at: Self.at(4.5))) == .accepted)
    }

    @Test func aRejectedClickIsNotTheLastAcceptedOne() throws {
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("ad-a", 3), F.ad("ad-b", 4)])
        #expect(try f.send([Self.click("s1", "ad-a", position: 9), Self.click("s1", "ad-gone"), Self.click("s1", "ad-b")])
                == [.rejected(.positionMismatch), .rejected(.adNotInFeed), .accepted])
        // Duplicates are not accepted clicks either: the last accepted one is still ad-b's.
        #expect(try f.send(Self.click("s1", "ad-a", at: Self.at(0.5))) == .duplicate(.simultaneousClick))
        #expect(try f.send(Self.click("s1", "ad-a", at: Self.at(1.2))) == .accepted)
    }

    @Test func theLastAcceptedClickIsTheOneAcceptedLast() throws {
        // Clicks arrive out of their occurred_at order (a batched, late client): the rule compares
        // with the click accepted last, not with the latest tap.
        let f = try Self.fixture()
        try f.feed("s1", "feed-1", [F.ad("ad-a", 3), F.ad("ad-b", 4), F.ad("ad-c", 5)])
        #expect(try f.send(Self.click("s1", "ad-a", at: Self.at(10))) == .accepted)
        #expect(try f.send(Self.click("s1", "ad-b", at: Self.at(0))) == .accepted)
        #expect(try f.send(Self.click("s1", "ad-c", at: Self.at(0.5))) == .duplicate(.simultaneousClick))
        #expect(try f.send(Self.click("s1", "ad-c", at: Self.at(10.2))) == .accepted)
    }

    @Test func offTheRulesAreVersionOnes() throws {
        let f = try F(clickWindowSeconds: 30, clickGraceSeconds: 0, tapWindowMilliseconds: 0)
        try f.feed("s1", "feed-1", [F.ad("ad-a", 3), F.ad("ad-b", 4), F.ad("ad-c", 5)])
        #expect(try f.send([Self.click("s1", "ad-a"), Self.click("s1", "ad-b"), Self.click("s1", "ad-c")]) == [.accepted, .accepted, .accepted])
    }

    // MARK: The grace window

    /// Feed A (x at row 3, y at 5) registered at t0, then B at t0 + 20 s with x moved to row 8 (or
    /// gone); events received at t0 + 25 s.
    static func raced(xInB: Bool) throws -> F {
        let f = try fixture()
        try f.feed("s1", "feed-A", [F.ad("x", 3), F.ad("y", 5)])
        f.clock.advance(seconds: 20)
        try f.feed("s1", "feed-B", xInB ? [F.ad("x", 8), F.ad("y", 5)] : [F.ad("y", 5)])
        f.clock.advance(seconds: 5)
        return f
    }

    @Test func aTapThatRacedARefreshIsBilledOnce() throws {
        for xInB in [true, false] {
            let f = try Self.raced(xInB: xInB)
            #expect(try f.send(Self.click("s1", "x", snapshot: "feed-A", position: 3, at: Self.at(15))) == .accepted)
            #expect(try f.send(Self.click("s1", "x", snapshot: "feed-A", position: 3, at: Self.at(15))) == .duplicate(.clickWithinWindow))
            #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 1)
        }
    }

    @Test func aRacedTapNamingTheNewRowIsAMismatch() throws {
        let f = try Self.raced(xInB: true)
        #expect(try f.send(Self.click("s1", "x", snapshot: "feed-A", position: 8, at: Self.at(15))) == .rejected(.positionMismatch))
    }

    @Test func aTapOutsideTheGraceIsJudgedByTheCurrentFeed() throws {
        // More than G after the replacement (t0 + 20 s + 30 s), and more than G before A existed.
        for occurred in [Self.at(50), Self.at(50.5), Self.at(-30.000001), Self.at(-45)] {
            let stillThere = try Self.raced(xInB: true)
            #expect(try stillThere.send(Self.click("s1", "x", snapshot: "feed-A", position: 3, at: occurred)) == .rejected(.staleSnapshot))
            let gone = try Self.raced(xInB: false)
            #expect(try gone.send(Self.click("s1", "x", snapshot: "feed-A", position: 3, at: occurred)) == .rejected(.adNotInFeed))
        }
        // And both edges from inside: A's own registration minus G, and just before the end of its grace.
        let f = try Self.raced(xInB: false)
        #expect(try f.send(Self.click("s1", "x", snapshot: "feed-A", at: Self.at(-30))) == .accepted)
        let g = try Self.raced(xInB: false)
        #expect(try g.send(Self.click("s1", "x", snapshot: "feed-A", at: Self.at(49.999999))) == .accepted)
    }

    @Test func aGraceClickAndAClickOnTheNewFeedAreOneTap() throws {
        let f = try Self.raced(xInB: true)
        #expect(try f.send(Self.click("s1", "x", snapshot: "feed-A", position: 3, at: Self.at(15))) == .accepted)
        f.clock.advance(seconds: 10)
        #expect(try f.send(Self.click("s1", "x", snapshot: "feed-B", position: 8, at: Self.at(33))) == .duplicate(.clickWithinWindow))
        f.clock.advance(seconds: 30)
        #expect(try f.send(Self.click("s1", "x", snapshot: "feed-B", position: 8, at: Self.at(63))) == .accepted)
    }

    @Test func registrationRecordsWhenASnapshotWasReplaced() throws {
        let f = try Self.raced(xInB: true)
        let rows = try f.connection.query("""
            SELECT snapshot_id, (extract(epoch FROM registered_at) * 1000000)::bigint, (extract(epoch FROM replaced_at) * 1000000)::bigint
            FROM snapshots ORDER BY registered_at
            """).rows
        #expect(try rows.map { try $0.decode(String.self, at: 0) } == ["feed-A", "feed-B"])
        #expect(try rows[0].decode(Int64?.self, at: 2) == Self.at(20).microsecondsSinceEpoch)
        #expect(try rows[1].decode(Int64?.self, at: 2) == nil)
        // A retry of the current snapshot replaces nothing.
        #expect(try f.feed("s1", "feed-B", [F.ad("x", 8), F.ad("y", 5)]) == .alreadyCurrent)
        #expect(try f.count("SELECT count(*) FROM snapshots WHERE replaced_at IS NULL") == 1)
    }

    @Test func aReplayOfAGraceClickKeepsItsAnswer() throws {
        let f = try Self.raced(xInB: false)
        let tap = Self.click("s1", "x", snapshot: "feed-A", at: Self.at(15))
        #expect(try f.send(tap) == .accepted)
        f.clock.advance(seconds: 120)  // the grace is long over; a replay is answered from the ledger
        #expect(try f.send(tap) == .accepted)
        #expect(try f.count("SELECT count(*) FROM events") == 1)
    }
}
