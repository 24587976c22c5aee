import Dispatch
import Foundation
import Postgres
import Runtime
import Synchronization
import Timestamps

/// On Citus, the way to each node that holds shards (docs/SCALING.md, "Routed group commit"): the
/// shard map, and a small pool of connections per node, made from `DATABASE_URL`'s settings with
/// the node's host and port. Group commit sends a transaction whose sessions all live on one node
/// to that node, where Citus runs every statement locally and commits in one phase.
///
/// The map is read through the process's own pool (any node has the metadata), at start, every
/// `refreshInterval`, and soon after a node could not be reached: a shard moved by
/// `citus_move_shard_placement` or the rebalancer is routed to its new node within one interval.
/// Until then its sessions go to the old node, which Citus routes on to the new one: slower, and
/// a transaction that spans two nodes commits in two phases, but nothing is stored differently.
public final class ShardRouter: Sendable {
    private struct State {
        var map: ShardMap?
        /// One pool per node that holds shards, made on first use; replaced when a node's address changes.
        var pools: [Int32: (node: ShardMap.Node, pool: PostgresPool)] = [:]
        var stopped = false
    }

    /// Where the map is read (the process's own pool: `DATABASE_URL`'s node).
    private let metadata: PostgresPool
    /// Makes the pool of a node: `DATABASE_URL`'s settings (user, password, database, TLS,
    /// keepalives...) with the node's host and port.
    private let makePool: @Sendable (ShardMap.Node) -> PostgresPool
    private let refreshInterval: Duration
    private let logger: Logger
    private let state = Mutex(State())
    /// Signalled to read the map now (a node unreachable), or to stop.
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()

    public init(metadata: PostgresPool, refreshInterval: Duration, logger: Logger,
                makePool: @escaping @Sendable (ShardMap.Node) -> PostgresPool) {
        self.metadata = metadata
        self.makePool = makePool
        self.refreshInterval = refreshInterval
        self.logger = logger
    }

    /// The current map (nil before it was read, or when the cluster's placement cannot be computed here).
    public var map: ShardMap? { state.withLock { $0.map } }

    /// Where every session of `sessionIDs` lives (`ShardMap.place`); nil when no one node holds
    /// them all, or no map is known.
    public func place(_ sessionIDs: some Sequence<String>) -> (shard: Int64?, group: Int32)? {
        guard let map = state.withLock({ $0.map }) else { return nil }
        return map.place(sessionIDs)
    }

    /// The pool of the node of `group` in the current map; nil when the map has no such node.
    public func pool(forGroup group: Int32) -> PostgresPool? {
        let (pool, replaced) = state.withLock { state -> (PostgresPool?, PostgresPool?) in
            guard !state.stopped, let node = state.map?.nodes[group] else { return (nil, nil) }
            if let existing = state.pools[group], existing.node == node { return (existing.pool, nil) }
            let pool = makePool(node)
            let replaced = state.pools[group]?.pool
            state.pools[group] = (node, pool)
            return (pool, replaced)
        }
        replaced?.shutdown()
        return pool
    }

    /// Reads the map now, and replaces the current one when it changed. Throws when the metadata
    /// cannot be read (the map in use stays).
    public func refresh() throws {
        let map = try metadata.withConnection(for: .shared) { try ShardMap.read(on: $0) }
        let (previous, retired) = state.withLock { state -> (ShardMap??, [PostgresPool]) in
            guard state.map != map else { return (.none, []) }
            defer { state.map = map }
            var retired: [PostgresPool] = []
            for (group, entry) in state.pools where map?.nodes[group] != entry.node {
                retired.append(entry.pool)
                state.pools[group] = nil
            }
            return (.some(state.map), retired)
        }
        retired.forEach { $0.shutdown() }
        guard case .some(let old) = previous else { return }
        if let map {
            let moved = old.map { Self.movedShards(from: $0, to: map) } ?? 0
            logger.info("Citus shard map read", [("nodes", map.nodes.values.map(\.description).sorted().joined(separator: ", ")),
                                                 ("shards", String(map.shards.count)), ("shards_moved", String(moved))])
        } else {
            logger.warning("Citus shard map unusable: events go through DATABASE_URL's node unrouted (sessions not hash-distributed, or this process's hash disagrees with the cluster's)")
        }
    }

    /// Asks for a new map soon: a node could not be reached (it may have left, or its shards moved).
    public func nodeUnreachable(group: Int32) {
        logger.warning("a Citus node could not be reached: reading the shard map again", [("group", String(group))])
        wake.signal()
    }

    /// Reads the map, then keeps reading it every `refreshInterval`. Until a map is read, events
    /// go through `DATABASE_URL`'s node as they would without routing.
    public func start() {
        do {
            try refresh()
        } catch {
            logger.warning("Citus shard map not read at start: events go through DATABASE_URL's node until it is", [("error", "\(error)")])
        }
        Thread.start(name: "adtally-shard-map", in: finished) { [self] in
            while true {
                _ = wake.wait(timeout: .now() + refreshInterval.dispatchInterval)
                if state.withLock({ $0.stopped }) { return }
                do {
                    try refresh()
                } catch {
                    logger.warning("Citus shard map not read: keeping the one in use", [("error", "\(error)")])
                }
            }
        }
    }

    /// Stops the refreshes and closes the nodes' pools.
    public func stop(by deadline: ContinuousClock.Instant) {
        let pools = state.withLock { state -> [PostgresPool] in
            state.stopped = true
            defer { state.pools = [:] }
            return state.pools.values.map(\.pool)
        }
        wake.signal()
        _ = finished.wait(timeout: .now() + deadline.remaining.dispatchInterval)
        pools.forEach { $0.shutdown() }
    }

    /// Shards whose node differs between two maps.
    static func movedShards(from old: ShardMap, to new: ShardMap) -> Int {
        var before: [Int64: Int32?] = [:]
        for shard in old.shards { before[shard.id] = shard.group }
        return new.shards.filter { shard in before[shard.id].map { $0 != shard.group } ?? false }.count
    }
}
