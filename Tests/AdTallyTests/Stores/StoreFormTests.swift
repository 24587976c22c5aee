@testable import AdTally
import Foundation
import Postgres
import TestSupport
import Testing

/// The three forms of the store's writes (rule 5, `EventStore.RowForm`): two inserts of array
/// parameters (PostgreSQL), one `adtally_store_events` call per session (migration 0013; Citus
/// through any node), or, on a shard's own node (Citus, routed), `VALUES` lists for a few events
/// and the array inserts for more.
/// A database test: `scripts/check-citus` runs it on a cluster (the Citus forms). The forms' pure
/// parts are tested in `EventStoreShapeTests.swift`, which needs no database.
@Suite(.timeLimit(.minutes(5))) struct StoreFormTests {
    /// Every form stores the same rows with the same outcomes, for a batch of several sessions
    /// with every optional column, of 130 events and of as many as `VALUES` lists take: on
    /// PostgreSQL (the function exists there too, and `VALUES` inserts are plain SQL) and on
    /// Citus, where the batch's sessions are on several shards.
    @Test(arguments: [130, EventStore.listedLimit])
    func everyInsertFormStoresTheSameRows(events count: Int) throws {
        var stored: [[String]] = []
        for (form, onShardNode) in [("arrays", false), ("a call per session", false), ("statements on the shard's node", true)] {
            let f = try StoreFixture()
            // A router that is never started: the store asks it nothing; its topology picks the form.
            let unused = PostgresPool(configuration: .init(connectionString: f.database.connectionString, size: 1, acquireTimeout: .seconds(1)))
            let topology: EventTopology = switch form {
            case "arrays": .plain
            case "a call per session": .citus
            default: .routedCitus(ShardRouter(metadata: unused, refreshInterval: .seconds(60), logger: .discarding) { _ in unused })
            }
            try f.feed("s1", "feed-1", [StoreFixture.ad("ad-1", 0), StoreFixture.ad("ad-2", 3)])
            try f.feed("s2", "feed-2", [StoreFixture.ad("ad-1", 1)])
            for short in 3...8 { try f.feed("s\(short)", "feed-\(short)", [StoreFixture.ad("ad-1", 0)]) }
            let store = EventStore(clickRule: f.events.clickRule, topology: topology)
            let ids = (0..<count).map { String(format: "00000000-0000-4000-8000-%012d", $0) }
            let batch = ids.enumerated().map { index, id in
                StoreFixture.event(index % 3 == 0 ? .click : .impression, index < count - 30 || index % 3 == 0 ? (index % 2 == 0 ? "s1" : "s2") : "s\(3 + index % 6)",
                                   index % 5 == 0 ? "ad-9" : "ad-1",
                                   id: id, snapshot: index % 4 == 0 ? "feed-1" : nil, position: index % 4 == 0 ? Int32(index % 2 == 0 ? 0 : 3) : nil,
                                   visibility: index % 7 == 0 ? Visibility(fraction: 0.75, milliseconds: 1_200) : nil)
            }
            _ = try store.ingest(batch, receivedAt: .fixed(f.clock.now()), on: f.connection, onShardNode: onShardNode)
            stored.append(try f.connection.query("""
                SELECT e.session_id || e.event_id::text || e.type || e.ad_id || e.status || coalesce(e.reason, '-')
                       || coalesce(e.snapshot_id, '-') || coalesce(e.position::text, '-') || coalesce(e.visible_fraction::text, '-')
                       || coalesce(e.visible_ms::text, '-') || e.occurred_at::text || e.received_at::text || l.status || coalesce(l.reason, '-') || (l.received_at = e.received_at)::text
                FROM events e JOIN event_ids l USING (session_id, event_id) ORDER BY e.session_id, e.event_id
                """).rows.map { try $0.decode(String.self, at: 0) })
        }
        #expect(stored[0].count == count)
        #expect(stored[0] == stored[1])
        #expect(stored[0] == stored[2])
    }
}
