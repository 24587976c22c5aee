import Postgres

/// Where each shard of the sessions' colocation group lives on a Citus cluster, read from its
/// metadata (`pg_dist_shard`, `pg_dist_placement`, `pg_dist_node`): which node holds a session's
/// rows, computed here the way Citus computes it (`hashtext` of the session id into the shard's
/// hash range, `PostgresHash`), with no round trip. Every table AdTally writes per session is in
/// that group (docs/SCALING.md), so the node of a session's `sessions` shard holds all of its
/// rows. A snapshot: `ShardRouter` reads a new one when the cluster changes.
///
/// Only a performance choice rests on it: a transaction sent to a node that no longer holds the
/// shard (a stale map, a move in flight) is still run correctly by Citus, which routes it on.
public struct ShardMap: Sendable, Equatable {
    /// A node that holds shards: its group (`pg_dist_node.groupid`, which placements name) and the
    /// address the cluster knows it by.
    public struct Node: Sendable, Hashable, CustomStringConvertible {
        public let group: Int32
        public let host: String
        public let port: Int

        public var description: String { "\(host):\(port) (group \(group))" }
    }

    /// A shard's hash range and the group of its one placement.
    struct Shard: Sendable, Equatable {
        let id: Int64
        let minimum: Int32
        let maximum: Int32
        /// nil when the shard has several placements (a replicated shard: a write goes to each,
        /// and no one node can run it locally) or none that is on an active primary.
        let group: Int32?
    }

    /// Sorted by `minimum`; the ranges do not overlap.
    let shards: [Shard]
    /// The nodes that hold at least one shard, by group.
    public let nodes: [Int32: Node]

    init(shards: [Shard], nodes: [Node]) {
        self.shards = shards.sorted { $0.minimum < $1.minimum }
        var byGroup: [Int32: Node] = [:]
        for node in nodes { byGroup[node.group] = node }
        self.nodes = byGroup
    }

    /// The shard whose hash range holds `sessionID`'s hash; nil when none does (a map being read
    /// while shards were split, say).
    func shard(ofSession sessionID: String) -> Shard? {
        let hash = PostgresHash.text(sessionID)
        // The last shard whose range starts at or below the hash.
        var low = 0, high = shards.count
        while low < high {
            let middle = (low + high) / 2
            if shards[middle].minimum <= hash { low = middle + 1 } else { high = middle }
        }
        guard low > 0 else { return nil }
        let shard = shards[low - 1]
        return hash <= shard.maximum ? shard : nil
    }

    /// The group of the node that holds `sessionID`'s rows, nil when no one node does.
    public func group(ofSession sessionID: String) -> Int32? {
        shard(ofSession: sessionID)?.group
    }

    /// Where every session of `sessionIDs` lives: one shard (and its node's group), or several
    /// shards on one node (`shard` nil); nil when they span nodes, one of them has no one node, or
    /// there are none.
    public func place(_ sessionIDs: some Sequence<String>) -> (shard: Int64?, group: Int32)? {
        var shard: Shard?
        var oneShard = true
        var previous: String?
        for sessionID in sessionIDs where sessionID != previous {  // a batch names its session again and again
            previous = sessionID
            guard let found = self.shard(ofSession: sessionID), let group = found.group else { return nil }
            if let first = shard {
                guard first.group == group else { return nil }
                oneShard = oneShard && first.id == found.id
            } else {
                shard = found
            }
        }
        guard let shard, let group = shard.group else { return nil }
        return (oneShard ? shard.id : nil, group)
    }

    /// The one group that holds every session of `sessionIDs`; nil when they span several nodes,
    /// one of them has no one node, or there are none.
    public func group(of sessionIDs: some Sequence<String>) -> Int32? {
        place(sessionIDs)?.group
    }

    /// Reads the map of `sessions`' colocation group through `connection` (any node of the
    /// cluster: Citus syncs its metadata to every node). nil without Citus, when `sessions` is not
    /// hash-distributed there, or when a check of the map against the server's own placement of
    /// probe ids (`get_shard_id_for_distribution_column`) disagrees: then this process's hash is
    /// not the cluster's (another encoding or collation), and nothing is routed.
    public static func read(on connection: PostgresConnection) throws -> ShardMap? {
        let citus = try connection.query("SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL").first?.decode(Bool.self, at: 0) ?? false
        guard citus else { return nil }
        let hashed = try connection.query("""
            SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('sessions') AND partmethod = 'h')
            """).first?.decode(Bool.self, at: 0) ?? false
        guard hashed else { return nil }
        let rows = try connection.query("""
            SELECT s.shardid, s.shardminvalue::int4, s.shardmaxvalue::int4,
                   count(n.groupid)::int4, min(n.groupid)::int4, min(n.nodename), min(n.nodeport)
            FROM pg_dist_shard s
            LEFT JOIN pg_dist_placement p ON p.shardid = s.shardid
            LEFT JOIN pg_dist_node n ON n.groupid = p.groupid AND n.noderole = 'primary' AND n.isactive
            WHERE s.logicalrelid = 'sessions'::regclass
            GROUP BY s.shardid, s.shardminvalue, s.shardmaxvalue
            """).rows
        var shards: [Shard] = []
        var nodes: Set<Node> = []
        for row in rows {
            var columns = row.columns()
            let id: Int64 = try columns.next()
            let minimum = Int32(truncatingIfNeeded: try columns.next(Int.self))
            let maximum = Int32(truncatingIfNeeded: try columns.next(Int.self))
            let placements: Int = try columns.next()
            let group = try columns.next(Int?.self).map { Int32(truncatingIfNeeded: $0) }
            let host: String? = try columns.next()
            let port: Int? = try columns.next()
            guard placements == 1, let group, let host, let port else {
                shards.append(Shard(id: id, minimum: minimum, maximum: maximum, group: nil))
                continue
            }
            shards.append(Shard(id: id, minimum: minimum, maximum: maximum, group: group))
            nodes.insert(Node(group: group, host: host, port: port))
        }
        let map = ShardMap(shards: shards, nodes: Array(nodes))
        return try map.agrees(on: connection) ? map : nil
    }

    /// Probe ids whose hashes fall all over the ring, of several lengths and scripts.
    static let probes: [String] = (0..<24).map { "adtally-probe-\($0)" } + ["", "é", "漢字-🎯", String(repeating: "x", count: 40)]

    /// Whether the server places every probe id in the shard this map computes.
    func agrees(on connection: PostgresConnection) throws -> Bool {
        let rows = try connection.query("""
            SELECT get_shard_id_for_distribution_column('sessions', v)
            FROM unnest(\(PostgresBinaryArray.text(Self.probes))::text[]) WITH ORDINALITY AS u(v, n) ORDER BY n
            """).rows
        guard rows.count == Self.probes.count else { return false }
        for (probe, row) in zip(Self.probes, rows) where try shard(ofSession: probe)?.id != row.decode(Int64.self, at: 0) {
            return false
        }
        return true
    }
}
