import AdTally
import Foundation
import Postgres
import Testing

/// API.md section 1 answers, against the real PostgreSQL.
@Suite(.timeLimit(.minutes(5))) struct FeedSnapshotStoreTests {
    typealias F = StoreFixture

    @Test func registerRetrySupersedeConflict() throws {
        let f = try F()
        let ads = [F.ad("ad-42", 3), F.ad("ad-77", 9, advertiser: "globex")]
        #expect(try f.feed("s1", "feed-1", ads) == .created)
        // The same content in another order is a retry.
        #expect(try f.feed("s1", "feed-1", ads.reversed()) == .alreadyCurrent)
        #expect(try f.feed("s1", "feed-1", [F.ad("ad-42", 4)]) == .snapshotConflict)
        #expect(try f.feed("s2", "feed-1", ads) == .snapshotConflict)
        #expect(try f.feed("s1", "feed-2", [F.ad("ad-42", 3)]) == .created)
        #expect(try f.feed("s1", "feed-1", ads) == .superseded)
        let current = try #require(try f.feeds.current(sessionID: "s1", on: f.connection))
        #expect(current.snapshotID == "feed-2")
        #expect(current.ads == [F.ad("ad-42", 3)])
    }

    @Test func adKeepsItsAdvertiserForever() throws {
        let f = try F()
        #expect(try f.feed("s1", "feed-1", [F.ad("ad-1", 0, advertiser: "acme")]) == .created)
        #expect(try f.feed("s2", "feed-2", [F.ad("ad-2", 0), F.ad("ad-1", 1, advertiser: "globex")])
                == .adAdvertiserConflict(adID: "ad-1", knownAdvertiserID: "acme"))
        // Nothing of the refused snapshot was kept: not the snapshot, not its new ad.
        #expect(try f.count("SELECT count(*) FROM snapshots WHERE snapshot_id = 'feed-2'") == 0)
        #expect(try f.count("SELECT count(*) FROM ads WHERE ad_id = 'ad-2'") == 0)
        #expect(try f.feeds.current(sessionID: "s2", on: f.connection) == nil)
    }

    @Test func snapshotConflictIsCheckedBeforeAdvertiserConflict() throws {
        let f = try F()
        #expect(try f.feed("s1", "feed-1", [F.ad("ad-1", 0, advertiser: "acme")]) == .created)
        #expect(try f.feed("s1", "feed-1", [F.ad("ad-1", 0, advertiser: "globex")]) == .snapshotConflict)
    }

    @Test func emptyFeedIsAFeed() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        #expect(try f.feed("s1", "feed-2", []) == .created)
        let current = try #require(try f.feeds.current(sessionID: "s1", on: f.connection))
        #expect(current.snapshotID == "feed-2")
        #expect(current.ads.isEmpty)
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .rejected(.adNotInFeed))
    }

    @Test func currentFeedListsAdsByPositionWithRegistrationTime() throws {
        let f = try F()
        f.clock.advance(seconds: 1.5)
        try f.feed("s1", "feed-1", [F.ad("b", 9), F.ad("a", 2), F.ad("c", 5)])
        let current = try #require(try f.feeds.current(sessionID: "s1", on: f.connection))
        #expect(current.ads.map(\.adID) == ["a", "c", "b"])
        #expect(current.registeredAt.microsecondsSinceEpoch == F.start.microsecondsSinceEpoch + 1_500_000)
        #expect(try f.feeds.current(sessionID: "unknown", on: f.connection) == nil)
    }
}
