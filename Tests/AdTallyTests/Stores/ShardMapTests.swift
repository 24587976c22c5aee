@testable import AdTally
import Postgres
import Testing

/// The shard map's lookups on maps made here (the map read from a real cluster, checked against
/// Citus's own placement of thousands of ids, is `CitusRoutingTests`, which `scripts/check-citus`
/// runs).
@Suite(.timeLimit(.minutes(5))) struct ShardMapTests {
    /// `count` shards of equal hash ranges over the whole 32-bit ring, as Citus makes them,
    /// placed in turn on groups 1 and 2.
    static func uniform(_ count: Int) -> ShardMap {
        let width = (Int64(1) << 32) / Int64(count)
        let shards = (0..<count).map { index in
            let minimum = Int64(Int32.min) + Int64(index) * width
            let maximum = index == count - 1 ? Int64(Int32.max) : minimum + width - 1
            return ShardMap.Shard(id: 100 + Int64(index), minimum: Int32(minimum), maximum: Int32(maximum), group: Int32(1 + index % 2))
        }
        return ShardMap(shards: shards.reversed(), nodes: [.init(group: 1, host: "w1", port: 5432), .init(group: 2, host: "w2", port: 5432)])
    }

    /// Every id lands in the one shard whose range holds its hash, whatever order the map was given in.
    @Test func aSessionsShardIsTheOneWhoseRangeHoldsItsHash() {
        let map = Self.uniform(32)
        for index in 0..<5_000 {
            let id = "session-\(index)-é"
            let hash = PostgresHash.text(id)
            let holding = map.shards.filter { $0.minimum <= hash && hash <= $0.maximum }
            #expect(holding.count == 1)
            #expect(map.shard(ofSession: id)?.id == holding.first?.id, "\(id)")
        }
        // The ring's ends.
        let ends = ShardMap(shards: [.init(id: 1, minimum: .min, maximum: -1, group: 1), .init(id: 2, minimum: 0, maximum: .max, group: 2)],
                            nodes: [])
        #expect(ends.shards.map(\.id) == [1, 2])
        for index in 0..<200 {
            let id = "x\(index)"
            #expect(ends.group(ofSession: id) == (PostgresHash.text(id) < 0 ? 1 : 2))
        }
    }

    /// A hash in no shard's range (a map read while shards were split, say), or a shard with no
    /// one node (replicated), routes nowhere; so does a set of sessions on two nodes.
    @Test func noOneNodeMeansNoGroup() {
        let gap = ShardMap(shards: [.init(id: 1, minimum: .min, maximum: -1, group: 1)], nodes: [])
        let positive = (0..<100).map { "g\($0)" }.first { PostgresHash.text($0) >= 0 }
        let negative = (0..<100).map { "g\($0)" }.first { PostgresHash.text($0) < 0 }
        #expect(gap.group(ofSession: positive ?? "") == nil)
        #expect(gap.group(ofSession: negative ?? "") == 1)

        let replicated = ShardMap(shards: [.init(id: 1, minimum: .min, maximum: .max, group: nil)], nodes: [])
        #expect(replicated.group(ofSession: "anything") == nil)

        let map = Self.uniform(4)
        let ids = (0..<200).map { "s\($0)" }
        let onOne = ids.filter { map.group(ofSession: $0) == 1 }
        let onTwo = ids.filter { map.group(ofSession: $0) == 2 }
        #expect(!onOne.isEmpty && !onTwo.isEmpty)
        #expect(map.group(of: onOne) == 1)
        #expect(map.group(of: onOne + onOne) == 1)
        #expect(map.group(of: onTwo) == 2)
        #expect(map.group(of: [onOne[0], onTwo[0]]) == nil)
        #expect(map.group(of: [String]()) == nil)
        // One shard, or several of one node.
        let first = onOne[0], sameShard = onOne.filter { map.shard(ofSession: $0)?.id == map.shard(ofSession: first)?.id }
        let otherShard = try? #require(onOne.first { map.shard(ofSession: $0)?.id != map.shard(ofSession: first)?.id })
        #expect(map.place(sameShard).map { $0.shard } == map.shard(ofSession: first)?.id)
        #expect(map.place(sameShard)?.group == 1)
        if let otherShard {
            #expect(map.place([first, otherShard]).map { $0.shard == nil && $0.group == 1 } == true)
        }
        #expect(map.place([first, onTwo[0]]) == nil)
    }

    /// The router logs how many shards changed node between two maps.
    @Test func movedShardsAreCounted() {
        let before = Self.uniform(8)
        var shards = before.shards
        shards[3] = .init(id: shards[3].id, minimum: shards[3].minimum, maximum: shards[3].maximum, group: 7)
        shards[5] = .init(id: shards[5].id, minimum: shards[5].minimum, maximum: shards[5].maximum, group: nil)
        let after = ShardMap(shards: shards, nodes: Array(before.nodes.values))
        #expect(ShardRouter.movedShards(from: before, to: after) == 2)
        #expect(ShardRouter.movedShards(from: before, to: before) == 0)
        #expect(before != after)
    }
}
