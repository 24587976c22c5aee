@testable import AdTally
import Foundation
import Postgres
import Testing

/// Every rule and reason code of API.md section 2, against the real PostgreSQL.
@Suite(.timeLimit(.minutes(5))) struct EventRulesTests {
    typealias F = StoreFixture

    @Test func reusedCellSendsThreeClicksForOneTap() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-42", 3)])
        let outcomes = try f.send([F.event(.click, "s1", "ad-42"), F.event(.click, "s1", "ad-42"), F.event(.click, "s1", "ad-42")])
        #expect(outcomes == [.accepted, .duplicate(.clickWithinWindow), .duplicate(.clickWithinWindow)])
        // The same three as separate requests.
        let g = try F()
        try g.feed("s1", "feed-1", [F.ad("ad-42", 3)])
        #expect(try g.send(F.event(.click, "s1", "ad-42")) == .accepted)
        #expect(try g.send(F.event(.click, "s1", "ad-42")) == .duplicate(.clickWithinWindow))
        #expect(try g.send(F.event(.click, "s1", "ad-42")) == .duplicate(.clickWithinWindow))
        #expect(try g.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 1)
        #expect(try g.count("SELECT count(*) FROM events") == 3)
    }

    @Test func clickWindowFollowsTheServerClock() throws {
        let f = try F(clickWindowSeconds: 30)
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .accepted)
        f.clock.advance(seconds: 29.999)
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .duplicate(.clickWithinWindow))
        f.clock.advance(seconds: 0.001)  // exactly 30 s after the accepted click
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .accepted)
        // A duplicate does not extend the window: it counts from the last accepted click.
        f.clock.advance(seconds: 20)
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .duplicate(.clickWithinWindow))
        f.clock.advance(seconds: 10)
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .accepted)
    }

    @Test func zeroWindowAcceptsEveryClickEvenInOneBatch() throws {
        // ADTALLY_CLICK_WINDOW_SECONDS=0 turns the one-tap rule off: no earlier click is "within
        // the last 0 seconds", so repeats in one batch and across batches are all billable.
        let f = try F(clickWindowSeconds: 0)
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        #expect(try f.send([F.event(.click, "s1", "ad-1"), F.event(.click, "s1", "ad-1"), F.event(.click, "s1", "ad-1")])
                == [.accepted, .accepted, .accepted])
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .accepted)
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 4)
    }

    @Test func impressionAndClickOfOneAdInOneBatchBothCount() throws {
        // The tap usually arrives with the impression: both claims of the pair land in one row.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 5)])
        #expect(try f.send(F.event(.impression, "s1", "ad-2")) == .accepted)
        #expect(try f.send([F.event(.impression, "s1", "ad-1"), F.event(.click, "s1", "ad-1"), F.event(.impression, "s1", "ad-1"),
                            F.event(.click, "s1", "ad-1"), F.event(.impression, "s1", "ad-2"), F.event(.click, "s1", "ad-2")])
                == [.accepted, .accepted, .duplicate(.impressionAlreadyCounted), .duplicate(.clickWithinWindow),
                    .duplicate(.impressionAlreadyCounted), .accepted])
        f.clock.advance(seconds: 30)
        #expect(try f.send([F.event(.click, "s1", "ad-1"), F.event(.impression, "s1", "ad-1")])
                == [.accepted, .duplicate(.impressionAlreadyCounted)])
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 5)
    }

    @Test func windowIsPerAdAndPerSession() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 5)])
        try f.feed("s2", "feed-2", [F.ad("ad-1", 0)])
        #expect(try f.send([F.event(.click, "s1", "ad-1"), F.event(.click, "s1", "ad-2"), F.event(.click, "s2", "ad-1")])
                == [.accepted, .accepted, .accepted])
    }

    @Test func refreshToShorterFeedThenClickOnRemovedAd() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 2), F.ad("ad-2", 7)])
        try f.feed("s1", "feed-2", [F.ad("ad-1", 2)])
        #expect(try f.send(F.event(.click, "s1", "ad-2")) == .rejected(.adNotInFeed))
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .accepted)
        // An impression only needs the ad to have been served at some point.
        #expect(try f.send(F.event(.impression, "s1", "ad-2")) == .accepted)
    }

    @Test func clickWithoutAnySnapshot() throws {
        let f = try F()
        #expect(try f.send(F.event(.click, "nobody", "ad-1")) == .rejected(.adNotInFeed))
        #expect(try f.send(F.event(.impression, "nobody", "ad-1")) == .rejected(.adNotServed))
    }

    @Test func staleRowNumberAndStaleSnapshot() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 3), F.ad("ad-2", 9)])
        try f.feed("s1", "feed-2", [F.ad("ad-1", 11), F.ad("ad-2", 9)])
        #expect(try f.send(F.event(.click, "s1", "ad-1", position: 3)) == .rejected(.positionMismatch))
        #expect(try f.send(F.event(.click, "s1", "ad-1", snapshot: "feed-1")) == .rejected(.staleSnapshot))
        // Snapshot is checked before position.
        #expect(try f.send(F.event(.click, "s1", "ad-1", snapshot: "feed-1", position: 3)) == .rejected(.staleSnapshot))
        #expect(try f.send(F.event(.click, "s1", "ad-1", snapshot: "feed-2", position: 11)) == .accepted)
        // Rejected clicks do not open a window: the accepted one above was the first.
        #expect(try f.count("SELECT count(*) FROM session_ads WHERE last_click_at IS NOT NULL") == 1)
    }

    @Test func impressionOnEveryAppearanceCountsOnce() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        #expect(try f.send(F.event(.impression, "s1", "ad-1")) == .accepted)
        #expect(try f.send(F.event(.impression, "s1", "ad-1")) == .duplicate(.impressionAlreadyCounted))
        #expect(try f.send(F.event(.impression, "s1", "ad-1")) == .duplicate(.impressionAlreadyCounted))
        // After a refresh, and long after, still counted once.
        try f.feed("s1", "feed-2", [F.ad("ad-1", 4)])
        f.clock.advance(seconds: 3600)
        #expect(try f.send(F.event(.impression, "s1", "ad-1")) == .duplicate(.impressionAlreadyCounted))
        #expect(try f.count("SELECT count(*) FROM events WHERE type = 'impression' AND status = 'accepted'") == 1)
    }

    @Test func viewability() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        #expect(try f.send(F.event(.impression, "s1", "ad-1", visibility: Visibility(fraction: 0.49, milliseconds: 5000))) == .rejected(.notViewable))
        #expect(try f.send(F.event(.impression, "s1", "ad-1", visibility: Visibility(fraction: 0.9, milliseconds: 999))) == .rejected(.notViewable))
        // A rejected impression does not use up the session's impression.
        #expect(try f.send(F.event(.impression, "s1", "ad-1", visibility: Visibility(fraction: 0.5, milliseconds: 1000))) == .accepted)
        #expect(try f.send(F.event(.impression, "s1", "ad-1", visibility: Visibility(fraction: 0.1, milliseconds: 10))) == .rejected(.notViewable))
        #expect(try f.send(F.event(.impression, "s1", "ad-1")) == .duplicate(.impressionAlreadyCounted))
    }

    @Test func inBatchRejectedImpressionDoesNotUseUpTheCount() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let outcomes = try f.send([
            F.event(.impression, "s1", "ad-1", visibility: Visibility(fraction: 0.2, milliseconds: 2000)),
            F.event(.impression, "s1", "ad-1"),
            F.event(.impression, "s1", "ad-1"),
        ])
        #expect(outcomes == [.rejected(.notViewable), .accepted, .duplicate(.impressionAlreadyCounted)])
    }

    @Test func clicksOfOneAdNamingDifferentRowsInOneBatch() throws {
        // A cell reused across a refresh: one tap reaches the old row's handler and the new one.
        // The first click that passes the feed checks is the candidate, whatever comes before it.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 3)])
        try f.feed("s1", "feed-2", [F.ad("ad-1", 11)])
        #expect(try f.send([F.event(.click, "s1", "ad-1", position: 3), F.event(.click, "s1", "ad-1", position: 11),
                            F.event(.click, "s1", "ad-1", position: 11), F.event(.click, "s1", "ad-1", snapshot: "feed-1")])
                == [.rejected(.positionMismatch), .accepted, .duplicate(.clickWithinWindow), .rejected(.staleSnapshot)])
        let g = try F()
        try g.feed("s1", "feed-1", [F.ad("ad-1", 3)])
        try g.feed("s1", "feed-2", [F.ad("ad-1", 11)])
        #expect(try g.send([F.event(.click, "s1", "ad-1", snapshot: "feed-2"), F.event(.click, "s1", "ad-1", position: 3)])
                == [.accepted, .rejected(.positionMismatch)])
        #expect(try g.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 1)
    }

    @Test func rejectionsAroundACountedImpressionInOneBatch() throws {
        // A non-viewable impression after the counted one is still not_viewable, not a duplicate;
        // for an ad never served, ad_not_served comes before viewability.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let glance = Visibility(fraction: 0.3, milliseconds: 200)
        #expect(try f.send([F.event(.impression, "s1", "ad-1"), F.event(.impression, "s1", "ad-1", visibility: glance),
                            F.event(.impression, "s1", "ad-1"), F.event(.impression, "s1", "ad-9", visibility: glance),
                            F.event(.impression, "s1", "ad-9")])
                == [.accepted, .rejected(.notViewable), .duplicate(.impressionAlreadyCounted), .rejected(.adNotServed), .rejected(.adNotServed)])
        #expect(try f.count("SELECT count(*) FROM session_ads WHERE impression_event_id IS NOT NULL") == 1)
    }

    @Test func retriedBatchGetsTheIdenticalAnswerAndStoresNothingNew() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 1)])
        let batch = [
            F.event(.impression, "s1", "ad-1"), F.event(.impression, "s1", "ad-1"), F.event(.click, "s1", "ad-2"),
            F.event(.click, "s1", "ad-3"), F.event(.click, "s1", "ad-2"),
        ]
        let first = try f.send(batch)
        let rowsBefore = try f.count("SELECT count(*) FROM events")
        f.clock.advance(seconds: 120)  // past the click window: a new click would be accepted, a replay is not new
        let second = try f.send(batch)
        #expect(first == second)
        #expect(first == [.accepted, .duplicate(.impressionAlreadyCounted), .accepted, .rejected(.adNotInFeed), .duplicate(.clickWithinWindow)])
        #expect(try f.count("SELECT count(*) FROM events") == rowsBefore)
        #expect(rowsBefore == 5)
    }

    @Test func batchMixingReplaysWithNewEvents() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 1)])
        let first = F.event(.impression, "s1", "ad-1"), conflicting = F.event(.click, "s1", "ad-2")
        #expect(try f.send([first, conflicting]) == [.accepted, .accepted])
        let reused = F.event(.click, "s1", "ad-1", id: conflicting.eventID)
        let outcomes = try f.send([F.event(.impression, "s1", "ad-2"), first, reused, F.event(.impression, "s1", "ad-1")])
        #expect(outcomes == [.accepted, .accepted, .rejected(.eventIDConflict), .duplicate(.impressionAlreadyCounted)])
        #expect(try f.count("SELECT count(*) FROM events") == 4)
        #expect(try f.count("SELECT count(*) FROM event_ids") == 4)
    }

    @Test func anIDRecordedByAConcurrentTransactionIsAnsweredAsAReplay() throws {
        // Another process records the id between this batch's ledger lookup and its insert: the
        // insert fails on the ledger's key, the batch runs again and finds the id taken.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let event = F.event(.impression, "s1", "ad-1")
        let other = try f.database.connect()
        try other.execute("BEGIN")
        #expect(try f.events.ingest([event], receivedAt: .fixed(f.clock.now()), inOpenTransactionOn: other) == [.accepted])
        let answer = try ConcurrencyTests.runBehindLock(f, { try f.send(event) }, release: { try other.execute("COMMIT") })
        #expect(answer == .accepted)
        #expect(try f.count("SELECT count(*) FROM events") == 1)
        #expect(try f.count("SELECT count(*) FROM event_ids") == 1)
        #expect(!EventStore.mayRunAgain(PostgresError(kind: .statementFailed, message: "x", sqlState: SQLState.uniqueViolation, constraint: "events_other")))
        #expect(EventStore.mayRunAgain(PostgresError(kind: .statementFailed, message: "x", sqlState: SQLState.uniqueViolation, constraint: "event_ids_pkey")))
        // As Citus relays a shard's violation (scripts/check-citus meets it in the racing tests).
        let citus = "duplicate key value violates unique constraint \"event_ids_pkey_102464\""
        #expect(EventStore.mayRunAgain(PostgresError(kind: .statementFailed, message: citus, sqlState: EventIDLedger.citusRelayedError)))
        #expect(!EventStore.mayRunAgain(PostgresError(kind: .statementFailed, message: "duplicate key value violates unique constraint \"events_other_102464\"",
                                                      sqlState: EventIDLedger.citusRelayedError)))
        #expect(!EventStore.mayRunAgain(PostgresError(kind: .statementFailed, message: "unique constraint \"event_ids_pkey_x\"", sqlState: EventIDLedger.citusRelayedError)))
        #expect(!EventStore.mayRunAgain(PostgresError(kind: .statementFailed, message: citus, sqlState: SQLState.checkViolation)))
    }

    @Test func eventIDReusedForOtherContentIsAConflict() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 1)])
        let id = UUID().uuidString.lowercased()
        #expect(try f.send(F.event(.impression, "s1", "ad-1", id: id)) == .accepted)
        #expect(try f.send(F.event(.impression, "s1", "ad-2", id: id)) == .rejected(.eventIDConflict))
        #expect(try f.send(F.event(.click, "s1", "ad-1", id: id)) == .rejected(.eventIDConflict))
        // Other fields do not matter for a replay.
        #expect(try f.send(F.event(.impression, "s1", "ad-1", id: id, position: 99)) == .accepted)
        #expect(try f.count("SELECT count(*) FROM events WHERE event_id = $1::uuid", [id]) == 1)
        // Since API 1.3 an id is its session's: the same id in another session is another event
        // (before, it was a conflict). InvalidTrafficTests covers more of it.
        try f.feed("s2", "feed-2", [F.ad("ad-1", 0)])
        #expect(try f.send(F.event(.impression, "s2", "ad-1", id: id)) == .accepted)
        #expect(try f.count("SELECT count(*) FROM events WHERE event_id = $1::uuid", [id]) == 2)
    }

    @Test func repeatedIDInsideOneBatch() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let id = UUID().uuidString.lowercased()
        let outcomes = try f.send([F.event(.click, "s1", "ad-1", id: id), F.event(.click, "s1", "ad-1", id: id),
                                   F.event(.impression, "s1", "ad-1", id: id)])
        #expect(outcomes == [.accepted, .accepted, .rejected(.eventIDConflict)])
        #expect(try f.count("SELECT count(*) FROM events") == 1)
    }

    @Test func replayOfARejectionIsTheSameRejection() throws {
        let f = try F()
        let event = F.event(.click, "s1", "ad-1")
        #expect(try f.send(event) == .rejected(.adNotInFeed))
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        #expect(try f.send(event) == .rejected(.adNotInFeed))
    }

    @Test func storedRowsCarryOutcomeAndBothClocks() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let event = F.event(.impression, "s1", "ad-1", snapshot: "feed-1", position: 0, visibility: Visibility(fraction: 0.75, milliseconds: 1500))
        f.clock.advance(seconds: 2)
        _ = try f.send(event)
        let row = try #require(try f.connection.query("""
            SELECT status, reason, (extract(epoch FROM occurred_at) * 1000000)::bigint, (extract(epoch FROM received_at) * 1000000)::bigint,
                   snapshot_id, position, visible_fraction, visible_ms
            FROM events WHERE event_id = $1::uuid
            """, [event.eventID]).first)
        #expect(try row.decode(String.self, at: 0) == "accepted")
        #expect(try row.decode(String?.self, at: 1) == nil)
        #expect(try row.decode(Int64.self, at: 2) == F.start.microsecondsSinceEpoch)
        #expect(try row.decode(Int64.self, at: 3) == F.start.microsecondsSinceEpoch + 2_000_000)
        #expect(try row.decode(String?.self, at: 4) == "feed-1")
        #expect(try row.decode(Int?.self, at: 5) == 0)
        #expect(try row.decode(Double?.self, at: 6) == 0.75)
        #expect(try row.decode(Int?.self, at: 7) == 1500)
    }
}
