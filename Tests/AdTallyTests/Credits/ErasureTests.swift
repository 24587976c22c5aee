@testable import AdTally
import AdTallyApp
import Foundation
import Postgres
import Testing

/// Erasure of a session (API.md section 12) against a real PostgreSQL: what names the session is
/// gone from every table, every count stays, the id is refused afterwards, and a repeat is safe.
@Suite(.timeLimit(.minutes(5))) struct ErasureTests {
    typealias F = StoreFixture

    /// The tables and columns that may hold a session id.
    static let sessionColumns = [("sessions", "session_id"), ("snapshots", "session_id"), ("snapshot_ads", "session_id"),
                                 ("session_ads", "session_id"), ("event_ids", "session_id"), ("events", "session_id"),
                                 ("credit_marks", "session_id"), ("snapshot_owners", "session_id")]

    /// Rows of every table that name `session`, by table.
    static func rowsNaming(_ session: String, _ f: F) throws -> [String: Int] {
        var found: [String: Int] = [:]
        for (table, column) in sessionColumns {
            let n = try f.count("SELECT count(*) FROM \(table) WHERE \(column) = $1", [session])
            if n != 0 { found[table] = n }
        }
        return found
    }

    /// Every raw event as what a count can see of it (ad, type, status, reason, received_at), with
    /// how many rows share it: equal before and after an erasure means every report is.
    static func countable(_ f: F) throws -> [String: Int] {
        var result: [String: Int] = [:]
        for row in try f.connection.query("""
            SELECT ad_id || '|' || type || '|' || status || '|' || coalesce(reason, '-') || '|' || received_at::text || '|' || occurred_at::text,
                   count(*)::int
            FROM events GROUP BY 1
            """).rows {
            result[try row.decode(String.self, at: 0)] = try row.decode(Int.self, at: 1)
        }
        return result
    }

    /// `sessionColumns` names every table of the schema with a `session_id` column: a migration that
    /// adds one must say here how erasure treats its rows, or this fails naming the table.
    @Test func everyTableThatNamesASessionIsChecked() throws {
        let f = try F()
        let tables = try f.connection.query("""
            SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            WHERE a.attname = 'session_id' AND NOT a.attisdropped AND c.relkind IN ('r', 'p') AND NOT c.relispartition
              AND c.relnamespace = 'public'::regnamespace
            """).rows.map { try $0.decode(String.self, at: 0) }
        #expect(Set(tables) == Set(Self.sessionColumns.map(\.0)), "tables with session_id: \(tables.sorted())")
    }

    /// A session with two feeds, impressions, clicks, a duplicate and a rejection; and another.
    static func traffic(_ f: F) throws {
        try f.feed("s-1", "f-1", [F.ad("ad-1", 0), F.ad("ad-2", 1, advertiser: "globex")])
        try f.feed("s-2", "f-2", [F.ad("ad-1", 0)])
        _ = try f.send([F.event(.impression, "s-1", "ad-1", visibility: Visibility(fraction: 0.9, milliseconds: 1500)),
                        F.event(.click, "s-1", "ad-1", snapshot: "f-1", position: 0),
                        F.event(.click, "s-1", "ad-1"),
                        F.event(.impression, "s-1", "ad-9"),
                        F.event(.impression, "s-2", "ad-1"), F.event(.click, "s-2", "ad-1")])
        f.clock.advance(seconds: 120)
        try f.feed("s-1", "f-3", [F.ad("ad-2", 0, advertiser: "globex")])
        _ = try f.send([F.event(.impression, "s-1", "ad-2"), F.event(.click, "s-1", "ad-2", snapshot: "f-1", position: 1)])
    }

    @Test func erasureDeletesWhatNamesTheSessionAndKeepsEveryCount() throws {
        let f = try F()
        try Self.traffic(f)
        let before = try Self.countable(f)
        let otherBefore = try Self.rowsNaming("s-2", f)
        #expect(try Self.rowsNaming("s-1", f).count == Self.sessionColumns.count - 1)  // every table but credit_marks

        let erasure = try ErasureStore(limit: .configured).erase("s-1", on: f.connection)
        #expect(erasure.isNew)
        #expect(erasure.events == 6)
        #expect(erasure.snapshots == 2)
        #expect(try Self.rowsNaming("s-1", f) == [:])
        #expect(try Self.countable(f) == before)
        #expect(try Self.rowsNaming("s-2", f) == otherBefore)
        // The anonymous rows name nothing: no snapshot, no position, a session key no client can send.
        #expect(try f.count("SELECT count(*) FROM events WHERE session_id LIKE '#%' AND snapshot_id IS NULL AND position IS NULL") == 6)
        // Only the digest is kept, never the id.
        #expect(try f.count("SELECT count(*) FROM erased_sessions WHERE digest = sha256('s-1'::bytea)") == 1)
        // The snapshot ids stay owned (by nobody): another session cannot take f-1.
        #expect(try f.feed("s-3", "f-1", [F.ad("ad-1", 0)]) == .snapshotConflict)

        // Again: zeros, the first erased_at.
        let again = try ErasureStore(limit: .configured).erase("s-1", on: f.connection)
        #expect(again == ErasureStore.Erasure(erasedAt: erasure.erasedAt, events: 0, snapshots: 0, isNew: false))
        #expect(try Self.countable(f) == before)
    }

    @Test func anErasedSessionIsRefusedAndStoredNowhere() throws {
        let f = try F()
        try Self.traffic(f)
        _ = try ErasureStore(limit: .configured).erase("s-1", on: f.connection)
        let before = try Self.countable(f)
        let replayID = UUID().uuidString.lowercased()
        let outcomes = try f.send([F.event(.impression, "s-1", "ad-1", id: replayID), F.event(.click, "s-1", "ad-1"),
                                   F.event(.impression, "s-1", "ad-1", id: replayID), F.event(.impression, "s-2", "ad-1")])
        #expect(outcomes == [.rejected(.sessionErased), .rejected(.sessionErased), .rejected(.sessionErased),
                             .duplicate(.impressionAlreadyCounted)])
        #expect(try Self.rowsNaming("s-1", f) == [:])
        let after = try Self.countable(f)
        #expect(after.values.reduce(0, +) == before.values.reduce(0, +) + 1)  // s-2's duplicate only
        // The suppression wins over the traffic filters too: a bot's event of the session is not stored either.
        var bot = F.event(.impression, "s-1", "ad-1")
        bot.trafficFilter = .botAgent
        #expect(try f.send(bot) == .rejected(.sessionErased))
        #expect(try f.feed("s-1", "f-9", [F.ad("ad-1", 0)]) == .sessionErased)
        #expect(try Self.rowsNaming("s-1", f) == [:])
        #expect(try f.count("SELECT count(*) FROM snapshot_owners WHERE snapshot_id = 'f-9'") == 0)
    }

    @Test func aSessionNeverSeenIsSuppressedAsWell() throws {
        let f = try F()
        let erasure = try ErasureStore(limit: .configured).erase("never-seen", on: f.connection)
        #expect(erasure.isNew && erasure.events == 0 && erasure.snapshots == 0)
        #expect(try f.send(F.event(.impression, "never-seen", "ad-1")) == .rejected(.sessionErased))
        #expect(try f.feed("never-seen", "f-1", [F.ad("ad-1", 0)]) == .sessionErased)
        #expect(try f.count("SELECT count(*) FROM events") == 0)
    }

    /// The erasure's plan finds one session's rows by index in every partition: no sequential scan.
    @Test func erasureReadsBySessionIndexInEveryPartition() throws {
        let f = try F()
        try f.connection.execute("SET enable_seqscan = on")
        let plan = try f.connection.query("EXPLAIN SELECT * FROM events WHERE session_id = 's-1'").rows
            .map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
        #expect(!plan.contains("Seq Scan"), "\(plan)")
        #expect(plan.contains("events_session_idx") || plan.contains("session_id_idx"), "\(plan)")
    }
}
