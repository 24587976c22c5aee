@testable import AdTally
import AdTallyApp
import Contract
import Dispatch
import Foundation
import Postgres
import Runtime
import Synchronization
import TestSupport
import Testing

/// Routed group commit (docs/SCALING.md): on a real Citus cluster (`scripts/check-citus`), the
/// shard map places ids where Citus does, a node's sessions are stored on that node in one-phase
/// transactions, and a shard moved under load loses and doubles nothing. On plain PostgreSQL
/// (`scripts/test`) there is no map, and an ingestor with a router stores exactly as one without.
@Suite(.serialized, .timeLimit(.minutes(10))) struct CitusRoutingTests {
    static let logger = Logger(level: .error) { _ in }

    /// Ids of many shapes: Unicode of every width, empty-looking, long, and UUIDs.
    static func ids(_ count: Int) -> [String] {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Character] = Array("abcXYZ019-_.: åäöéß✓漢字🎯\u{301}\"'\\")
        var ids = ["", " ", "\t", "0", "é", "e\u{301}", "🎯", String(repeating: "s", count: 200)]
        while ids.count < count {
            let length = Int.random(in: 1...64, using: &generator)
            ids.append(ids.count % 3 == 0 ? UUID().uuidString : String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "a" }))
        }
        return ids
    }

    /// A migrated database with `sessions` sessions (`r-0`...) of ads `ad-0` to `ad-2`, a pool on
    /// it, and a router started on that pool.
    struct Setup {
        let fixture: StoreFixture
        let pool: PostgresPool
        let router: ShardRouter
        let isCitus: Bool
        let sessions: [String]

        init(sessions count: Int) throws {
            fixture = try StoreFixture()
            isCitus = try CitusDistributionTests.isCitus(fixture.connection)
            sessions = (0..<count).map { "r-\($0)" }
            for session in sessions {
                try fixture.feed(session, "feed-\(session)", (0..<3).map { StoreFixture.ad("ad-\($0)", Int32($0)) })
            }
            let configuration = PostgresPool.Configuration(connectionString: fixture.database.connectionString, size: 12,
                                                           acquireTimeout: .seconds(30))
            pool = PostgresPool(configuration: configuration)
            router = ShardRouter(metadata: pool, refreshInterval: .milliseconds(500), logger: CitusRoutingTests.logger) { [pool] node in
                pool.sibling(host: node.host, port: node.port, size: 2)
            }
            router.start()
        }

        func ingestor(routed: Bool = true) -> EventIngestor {
            let topology: EventTopology = routed ? .routedCitus(router) : isCitus ? .citus : .plain
            let store = EventStore(clickRule: fixture.events.clickRule, topology: topology)
            let ingestor = EventIngestor(pool: pool, store: store, clock: fixture.clock, logger: CitusRoutingTests.logger,
                                         committers: 6, queueWait: .seconds(60))
            ingestor.start()
            return ingestor
        }

        /// The rows of `pg_dist_transaction` (one per transaction prepared for two-phase commit)
        /// summed over every node of the test's cluster.
        func preparedTransactions() throws -> Int {
            var total = try fixture.count("SELECT count(*) FROM pg_dist_transaction")
            for worker in try fixture.database.workerConnectionStrings() {
                let connection = try PostgresConnection(connectionString: worker)
                defer { connection.close() }
                total += try connection.query("SELECT count(*) FROM pg_dist_transaction").first?.decode(Int.self, at: 0) ?? 0
            }
            return total
        }

        func stop(_ ingestor: EventIngestor) {
            ingestor.shutdown(by: .now + .seconds(30))
            router.stop(by: .now + .seconds(5))
            pool.shutdown()
        }
    }

    /// Sends `requests` from `threads` threads at once through `ingestor`; the outcomes by request.
    static func sendConcurrently(_ requests: [[EventInput]], threads: Int, through ingestor: EventIngestor) -> [Result<[EventOutcome], any Error>] {
        let results = Mutex<[Int: Result<[EventOutcome], any Error>]>([:])
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in stride(from: thread, to: requests.count, by: threads) {
                let result = Result { try ingestor.ingest(requests[index]) }
                results.withLock { $0[index] = result }
            }
        }
        return results.withLock { all in requests.indices.compactMap { all[$0] } }
    }

    @Test func theMapPlacesThousandsOfIdsWhereCitusDoes() throws {
        let fixture = try StoreFixture()
        guard try CitusDistributionTests.isCitus(fixture.connection) else {
            // Plain PostgreSQL: nothing is distributed, so there is no map.
            #expect(try ShardMap.read(on: fixture.connection) == nil)
            return
        }
        let map = try #require(try ShardMap.read(on: fixture.connection), "no shard map on a Citus cluster")
        let shardCount = try fixture.count("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'sessions'::regclass")
        #expect(map.shards.count == shardCount)
        #expect(map.shards.allSatisfy { $0.group != nil })
        let ids = Self.ids(3_000)
        let rows = try fixture.connection.query("""
            SELECT get_shard_id_for_distribution_column('sessions', v), p.groupid::int4
            FROM unnest($1::text[]) WITH ORDINALITY AS u(v, n)
            JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('sessions', v)
            ORDER BY n
            """, [PostgresBinaryArray.text(ids)]).rows
        #expect(rows.count == ids.count)
        var wrong: [String] = []
        for (id, row) in zip(ids, rows) {
            let shard = try row.decode(Int64.self, at: 0), group = try row.decode(Int.self, at: 1)
            if map.shard(ofSession: id)?.id != shard || map.group(ofSession: id).map(Int.init) != group {
                wrong.append(id.debugDescription)
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) of \(ids.count) placed elsewhere, first: \(wrong.prefix(5))")
    }

    /// Requests whose sessions all live on one node run there (one shard's requests together, a
    /// request of several shards on its own): no two-phase commit, nothing through
    /// `DATABASE_URL`'s node but the map, every rule as without routing (each pair's first
    /// impression counted once, a repeat a duplicate).
    @Test func aNodesSessionsAreStoredOnItInOnePhase() throws {
        let setup = try Setup(sessions: 48)
        let ingestor = setup.ingestor()
        defer { setup.stop(ingestor) }
        let groups: [Int32: [String]]
        if setup.isCitus {
            let map = try #require(setup.router.map, "the router read no map")
            groups = Dictionary(grouping: setup.sessions) { map.group(ofSession: $0) ?? -1 }
            #expect(groups[-1] == nil)
        } else {
            #expect(setup.router.map == nil)
            groups = [0: setup.sessions]
        }
        let preparedBefore = setup.isCitus ? try setup.preparedTransactions() : 0

        // Each request: 1 to 3 sessions of one node, an impression of each ad, twice over (the
        // second time with new ids: duplicates).
        var requests: [[EventInput]] = []
        var firstRound = 0
        for round in 0..<2 {
            if round == 1 { firstRound = requests.count }
            for (_, sessions) in groups.sorted(by: { $0.key < $1.key }) {
                var index = 0
                while index < sessions.count {
                    let width = 1 + (index + round) % 3
                    let named = sessions[index..<min(index + width, sessions.count)]
                    requests.append(named.flatMap { session in (0..<3).map { StoreFixture.event(.impression, session, "ad-\($0)") } })
                    index += width
                }
            }
        }
        // The second round after the first: each round's requests concurrently.
        let results = Self.sendConcurrently(Array(requests[..<firstRound]), threads: 8, through: ingestor)
            + Self.sendConcurrently(Array(requests[firstRound...]), threads: 8, through: ingestor)
        #expect(results.count == requests.count)
        for (index, result) in results.enumerated() {
            let outcomes = try result.get()
            let expected: EventOutcome = index < firstRound ? .accepted : .duplicate(.impressionAlreadyCounted)
            #expect(outcomes.allSatisfy { $0 == expected }, "request \(index): \(outcomes)")
        }
        let events = requests.reduce(0) { $0 + $1.count }
        #expect(try setup.fixture.count("SELECT count(*) FROM events") == events)
        #expect(try setup.fixture.count("SELECT count(*) FROM event_ids") == events)
        #expect(try setup.fixture.count("SELECT count(*) FROM session_ads WHERE impression_event_id IS NOT NULL") == setup.sessions.count * 3)

        guard setup.isCitus else { return }
        #expect(try setup.preparedTransactions() == preparedBefore, "a routed transaction committed in two phases")
        // Every transaction ran on its node's pool: the process's own pool opened one connection, for the map.
        #expect(setup.pool.connectionsOpen <= 1)
        for group in groups.keys {
            #expect((setup.router.pool(forGroup: group)?.connectionsOpen ?? 0) >= 1, "node group \(group) ran nothing")
        }
        // A request of sessions on two nodes is still stored, through DATABASE_URL's node.
        if groups.count >= 2, let one = groups.values.first?.first, let other = groups.values.dropFirst().first?.first {
            let spanning = [StoreFixture.event(.click, one, "ad-0"), StoreFixture.event(.click, other, "ad-1")]
            #expect(try ingestor.ingest(spanning) == [.accepted, .accepted])
        }
    }

    /// A shard moved to another node while events arrive: the router reads the new map within
    /// seconds, and every event is stored once, with one counted impression a pair, whichever
    /// node its transaction ran on.
    @Test func aShardMovedUnderLoadLosesAndDoublesNothing() throws {
        try Self.underLoad { setup, nodes in
            let map = try #require(setup.router.map)
            // The shard of the first session, and a node it is not on.
            let shard = try #require(map.shard(ofSession: setup.sessions[0]))
            let source = try #require(nodes.first { $0.group == shard.group })
            let target = try #require(nodes.first { $0.group != shard.group })
            _ = try setup.fixture.connection.query("""
                SELECT citus_move_shard_placement($1, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')
                """, [shard.id, source.host, source.port, target.host, target.port])
        }
    }

    /// The rebalancer (`citus_rebalance_start`, a background job of several moves) run while
    /// events arrive, after a few shards were moved off one node: the same guarantees, and the
    /// router's map agrees with every new placement within seconds.
    @Test func theRebalancerUnderLoadLosesAndDoublesNothing() throws {
        try Self.underLoad(before: { setup, nodes in
            // Unbalance first (before the load): up to 3 shards of the last node moved to the first.
            let map = try #require(setup.router.map)
            let from = try #require(nodes.last), to = try #require(nodes.first)
            for shard in map.shards.filter({ $0.group == from.group }).prefix(3) {
                _ = try setup.fixture.connection.query("""
                    SELECT citus_move_shard_placement($1, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')
                    """, [shard.id, from.host, from.port, to.host, to.port])
            }
        }) { setup, _ in
            let connection = setup.fixture.connection
            let job = try connection.query("SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')").first?
                .decode(Int64?.self, at: 0)
            #expect(job != nil, "the rebalancer found nothing to move")
            // Bounded: a job whose tasks never start (no free background worker on the coordinator:
            // each database with the extension holds one per node) would be waited for forever.
            _ = try connection.query("SELECT set_config('statement_timeout', '180s', false)")
            defer { _ = try? connection.query("SELECT set_config('statement_timeout', '0', false)") }
            do {
                _ = try connection.query("SELECT citus_rebalance_wait()")
            } catch {
                let tasks = try connection.query("""
                    SELECT coalesce(string_agg(status::text || ' ' || command || coalesce(' (' || message || ')', ''), '; '), 'none')
                    FROM pg_dist_background_task WHERE job_id = $1
                    """, [job ?? 0]).first?.decode(String.self, at: 0)
                Issue.record("the rebalance job did not finish within 180 s (\(error)); its tasks: \(tasks ?? "unknown")")
                _ = try? connection.query("SELECT citus_job_cancel($1)", [job ?? 0])
                return
            }
            let state = try connection.query("SELECT state::text FROM citus_rebalance_status()").first?.decode(String.self, at: 0)
            #expect(state == "finished", "the rebalance job ended \(state ?? "unknown")")
        }
    }

    /// A node of the cluster that holds shards.
    typealias Node = (group: Int32, host: String, port: Int)

    /// Where Citus places each of `sessions` now, by node group.
    static func placements(_ sessions: [String], on connection: PostgresConnection) throws -> [String: Int32] {
        let rows = try connection.query("""
            SELECT v, p.groupid::int4 FROM unnest($1::text[]) AS u(v)
            JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('sessions', v)
            """, [PostgresBinaryArray.text(sessions)]).rows
        var placed: [String: Int32] = [:]
        for row in rows { placed[try row.decode(String.self, at: 0)] = Int32(try row.decode(Int.self, at: 1)) }
        return placed
    }

    /// Runs `change` (which moves shards) while 4 threads send one session's batch after another
    /// (an impression of each ad and a click, new ids each time); then checks that the router's
    /// map agrees with Citus's placements within seconds, that events were stored after the
    /// change, and that every event is stored once, with one counted impression a pair and every
    /// answer the outcome stored. `before` runs before the load starts.
    static func underLoad(before: (Setup, [Node]) throws -> Void = { _, _ in },
                          _ change: (Setup, [Node]) throws -> Void) throws {
        let setup = try Setup(sessions: 64)
        let ingestor = setup.ingestor()
        defer { setup.stop(ingestor) }
        guard setup.isCitus else {
            // Plain PostgreSQL: there are no shards to move; the router routes nothing.
            #expect(setup.router.place(setup.sessions) == nil)
            return
        }
        let nodes: [Node] = try setup.fixture.connection.query("""
            SELECT groupid::int4, nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' AND isactive AND shouldhaveshards ORDER BY groupid
            """).rows.map { (group: Int32(try $0.decode(Int.self, at: 0)), host: try $0.decode(String.self, at: 1), port: try $0.decode(Int.self, at: 2)) }
        try #require(nodes.count >= 2, "moving a shard needs two nodes that hold shards")
        try before(setup, nodes)

        let stop = Atomic<Bool>(false)
        let sent = Mutex<[(events: [EventInput], result: Result<[EventOutcome], any Error>)]>([])
        let load = DispatchGroup()
        for thread in 0..<4 {
            DispatchQueue.global().async(group: load) {
                var round = 0
                while !stop.load(ordering: .relaxed) && round < 20_000 {
                    let session = setup.sessions[(round * 4 + thread) % setup.sessions.count]
                    let events = (0..<3).map { StoreFixture.event(.impression, session, "ad-\($0)") } + [StoreFixture.event(.click, session, "ad-1")]
                    let result = Result { try ingestor.ingest(events) }
                    sent.withLock { $0.append((events, result)) }
                    round += 1
                }
            }
        }
        // However this test ends, the load stops first (before the ingestor shuts down).
        defer {
            stop.store(true, ordering: .relaxed)
            load.wait()
        }
        Thread.sleep(forTimeInterval: 1)
        try change(setup, nodes)
        // The router sees the new placements within a few of its refreshes.
        let placed = try placements(setup.sessions, on: setup.fixture.connection)
        #expect(placed.count == setup.sessions.count)
        func misplaced() -> Int { placed.filter { setup.router.map?.shard(ofSession: $0.key)?.group != $0.value }.count }
        let changed = ContinuousClock.now
        while misplaced() > 0 && ContinuousClock.now - changed < .seconds(15) {
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(misplaced() == 0, "the router's map disagrees with Citus on \(misplaced()) sessions")
        let sentAtChange = sent.withLock { $0.count }
        Thread.sleep(forTimeInterval: 2)
        stop.store(true, ordering: .relaxed)
        load.wait()
        let all = sent.withLock { $0 }
        #expect(all.count > sentAtChange, "nothing was stored after the change")

        // A request that failed (none should) is sent again, as a client would: answered from
        // the ledger if it had committed.
        var failures = 0
        for request in all {
            guard case .failure = request.result else { continue }
            failures += 1
            _ = try ingestor.ingest(request.events)
        }
        #expect(failures == 0)
        let events = all.reduce(0) { $0 + $1.events.count }
        #expect(try setup.fixture.count("SELECT count(*) FROM events") == events)
        #expect(try setup.fixture.count("SELECT count(DISTINCT (session_id, event_id)) FROM events") == events)
        #expect(try setup.fixture.count("SELECT count(*) FROM event_ids") == events)
        // One counted impression a pair, the one the pair's row names.
        #expect(try setup.fixture.count("""
            SELECT count(*) FROM (SELECT session_id, ad_id FROM events WHERE type = 'impression' AND status = 'accepted'
                                  GROUP BY 1, 2 HAVING count(*) > 1) d
            """) == 0)
        #expect(try setup.fixture.count("""
            SELECT count(*) FROM events e JOIN session_ads x USING (session_id, ad_id)
            WHERE e.type = 'impression' AND e.status = 'accepted' AND x.impression_event_id = e.event_id
            """) == setup.fixture.count("SELECT count(*) FROM session_ads WHERE impression_event_id IS NOT NULL"))
        // Every answer is the outcome stored.
        var answered: [String: String] = [:]
        for request in all {
            guard case .success(let outcomes) = request.result else { continue }
            for (event, outcome) in zip(request.events, outcomes) { answered[event.eventID] = outcome.status.rawValue }
        }
        let stored = try setup.fixture.connection.query("SELECT event_id::text, status FROM events").rows
        var disagreements = 0
        for row in stored where try answered[row.decode(String.self, at: 0)] != row.decode(String.self, at: 1) { disagreements += 1 }
        #expect(disagreements == 0)
    }
}
