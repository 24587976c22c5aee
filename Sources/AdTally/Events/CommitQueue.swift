/// What a transaction may hold together on Citus (`CommitQueue`).
enum TransactionGroup: Hashable, Sendable {
    /// One session's requests: its shard.
    case session(String)
    /// Requests whose sessions all live in one shard (`pg_dist_shard.shardid`), on the node of
    /// group `node` (`pg_dist_node.groupid`).
    case shard(Int64, node: Int32)
    /// A request whose sessions live in several shards, all on the node of group `node`: a
    /// transaction of their own on that node (multi-shard statements, each shard's task local).
    case node(Int32)

    /// The node the transaction runs on, when routed.
    var node: Int32? {
        switch self {
        case .session: return nil
        case .shard(_, let node), .node(let node): return node
        }
    }
}

/// The queue of group commit (`EventIngestor`): requests waiting for a transaction, and the rows
/// that the committers' transactions under way will lock.
///
/// A committer takes the queued requests that share no row with another committer's transaction
/// under way; the others stay queued, in order, for a later transaction. Such a row is a pair's
/// `session_ads` row, which a claim locks until its transaction commits, a session's row, which
/// deciding its clicks locks, or an event id's ledger entry. Taken together with that transaction, a second request would only wait on the lock,
/// through the first one's `COMMIT`, doing nothing; taken later, it finds the first one's claims
/// committed (and a request in the same transaction is settled by the store within the batch).
/// This only schedules: the decisions are PostgreSQL's, which also orders the transactions of
/// other processes.
///
/// With `grouped` (on Citus), a transaction takes the requests of one `TransactionGroup` only: the
/// first request it can take decides the group, and later requests of other groups stay queued
/// for another transaction (they share no row with it, so none waits for it). A group is one
/// session (its shard: every statement a router query, its commit no two-phase commit), or, routed
/// (`ShardRouter`), every session of one shard (every statement a router query that the shard's
/// node, which the transaction runs on, executes locally; one-phase commit there). At most
/// `transactionsPerShard` transactions of one shard's group run at once: the rest of the shard's
/// requests wait and go in the next, larger, transaction, while other shards' run. A request of
/// no group (its sessions on several nodes) is a transaction of its own.
///
/// Fair between clients: when requests of several clients are queued, a transaction takes them
/// round by round (each client's first request, then each one's next, weighted by their events;
/// see `take`), so that one client's flood of batches, however deep, delays another client's
/// request by one transaction, not by the flood: the rest of the flood stays queued, in order, and
/// waits (up to the ingestor's `queueWait`, then `503`) on its own account.
///
/// Not thread-safe: the ingestor keeps it under its lock.
struct CommitQueue<Item> {
    private struct Entry {
        let item: Item
        let events: Int
        let rowKeys: [Int]
        /// What the request may share a transaction with on Citus; nil for nothing.
        let group: TransactionGroup?
        /// Who sent it (a hash of its client address; 0 when unknown), for fairness between clients.
        let client: Int
    }

    private var entries: [Entry] = []
    /// The row keys of each committer's transaction under way (empty when it has none).
    private var busy: [Set<Int>]
    /// The group of each committer's transaction under way (nil when it has none, or no group).
    private var busyGroups: [TransactionGroup?]
    /// How many transactions of one shard's group may run at once.
    private let transactionsPerShard: Int

    init(committers: Int, transactionsPerShard: Int = 1) {
        busy = Array(repeating: [], count: max(1, committers))
        busyGroups = Array(repeating: nil, count: max(1, committers))
        self.transactionsPerShard = max(1, transactionsPerShard)
    }

    var count: Int { entries.count }

    /// Queues `item`, a request of `events` events whose rows are `rowKeys` (see `rowKeys(of:)`),
    /// of `group` (see the type's comment), from `client` (a hash of its address, see the type's
    /// comment on fairness).
    mutating func append(_ item: Item, events: Int, rowKeys: [Int], group: TransactionGroup? = nil, client: Int = 0) {
        entries.append(Entry(item: item, events: events, rowKeys: rowKeys, group: group, client: client))
    }

    /// Removes every queued item for which `matches` is true, returning them in queue order.
    mutating func removeAll(where matches: (Item) -> Bool) -> [Item] {
        guard entries.contains(where: { matches($0.item) }) else { return [] }
        var removed: [Item] = []
        entries.removeAll { entry in
            guard matches(entry.item) else { return false }
            removed.append(entry.item)
            return true
        }
        return removed
    }

    /// Empties the queue, returning what was queued.
    mutating func removeAll() -> [Item] {
        defer { entries = [] }
        return entries.map(\.item)
    }

    /// Ends `committer`'s transaction under way, if any, and takes its next one: the queued items,
    /// in the order below, that share no row key with another committer's transaction under way,
    /// nor with an item held back before them, up to `maximumEvents` events (the first item that
    /// can be taken is taken whatever its size), returned in queue order. An empty answer means
    /// nothing can be taken now: every queued item (if any) waits for a transaction under way,
    /// whose committer will take it when it comes back.
    ///
    /// The order is the queue's while one client's items are queued. With several clients, it is
    /// fair between them (see the type's comment): an item comes after every item whose client has
    /// fewer events queued before it, and among equals in queue order. A client's first item
    /// comes first, then a second item of each client in turn, weighted by size: one client's flood
    /// of batches is taken a transaction's worth at a time, and another client's request that
    /// arrives behind it goes in the next transaction. A client's own items keep their order.
    ///
    /// An item never overtakes one considered before it that shares rows with it: requests for one
    /// row keep their order (one client's always; several clients' concurrent requests have no
    /// order of their own), and a held-back item is not starved by later ones that keep its rows
    /// busy.
    ///
    /// `grouped`: only items of the first taken item's group (see the type's comment), and not
    /// of a shard whose group has `transactionsPerShard` transactions under way.
    mutating func take(for committer: Int, maximumEvents: Int, grouped: Bool = false) -> [Item] {
        busy[committer].removeAll(keepingCapacity: true)
        busyGroups[committer] = nil
        var taken: [Int] = []  // indices into `entries`
        var events = 0
        var heldBack: Set<Int> = []
        var takenGroup: TransactionGroup?? = nil  // the group of the first item taken, once one is
        var fullShards: Set<Int64>?  // the shards with their most transactions under way, once asked
        for index in considerationOrder() {
            let entry = entries[index]
            if sharesRows(entry, withOthersThan: committer) || (!heldBack.isEmpty && entry.rowKeys.contains(where: heldBack.contains)) {
                heldBack.formUnion(entry.rowKeys)
                continue
            }
            if grouped, let first = takenGroup, first == nil || entry.group != first {
                // Another group's (or none's): a later transaction. An item of no group is held
                // back like one that waits for rows, so that no later item that shares rows with
                // it overtakes it; another group's shares none.
                if entry.group == nil { heldBack.formUnion(entry.rowKeys) }
                continue
            }
            if grouped, takenGroup == nil, case .shard(let shard, _)? = entry.group {
                if fullShards == nil { fullShards = shardsAtTheirLimit() }
                if fullShards?.contains(shard) == true {
                    // Its shard runs as many transactions as it may: this one waits for the next,
                    // and so does any later item that shares its rows (a session whose shard's
                    // node changed with the shard map keeps its requests' order).
                    heldBack.formUnion(entry.rowKeys)
                    continue
                }
            }
            if !taken.isEmpty && events + entry.events > maximumEvents { break }
            if taken.isEmpty {
                takenGroup = .some(entry.group)
                busyGroups[committer] = entry.group
            }
            taken.append(index)
            events += entry.events
            busy[committer].formUnion(entry.rowKeys)
        }
        guard !taken.isEmpty else { return [] }
        taken.sort()
        var left: [Entry] = []  // the queue after this take, in order
        left.reserveCapacity(entries.count - taken.count)
        var items: [Item] = []
        items.reserveCapacity(taken.count)
        var next = 0
        for (index, entry) in entries.enumerated() {
            if next < taken.count && taken[next] == index {
                items.append(entry.item)
                next += 1
            } else {
                left.append(entry)
            }
        }
        entries = left
        return items
    }

    /// The indices of `entries` in the order `take` considers them: the queue's when one client's
    /// items are queued (or none); else by the events the item's client has queued before it,
    /// then by queue position.
    private func considerationOrder() -> [Int] {
        guard let first = entries.first?.client, entries.contains(where: { $0.client != first }) else {
            return Array(entries.indices)
        }
        var before: [Int: Int] = [:]  // events queued so far, per client
        before.reserveCapacity(entries.count)
        var ranked: [(rank: Int, index: Int)] = []
        ranked.reserveCapacity(entries.count)
        var repeated = false  // a client with two items queued: else every rank is 0, the queue's order
        for (index, entry) in entries.enumerated() {
            let rank = before[entry.client, default: 0]
            repeated = repeated || rank > 0
            ranked.append((rank, index))
            before[entry.client] = rank + entry.events
        }
        guard repeated else { return Array(entries.indices) }
        ranked.sort { $0.rank != $1.rank ? $0.rank < $1.rank : $0.index < $1.index }
        return ranked.map(\.index)
    }

    /// The shards whose groups have `transactionsPerShard` transactions under way.
    private func shardsAtTheirLimit() -> Set<Int64> {
        var running: [Int64: Int] = [:]
        for case .shard(let shard, _)? in busyGroups { running[shard, default: 0] += 1 }
        return Set(running.filter { $0.value >= transactionsPerShard }.keys)
    }

    private func sharesRows(_ entry: Entry, withOthersThan committer: Int) -> Bool {
        busy.indices.contains { other in
            other != committer && !busy[other].isEmpty && entry.rowKeys.contains(where: busy[other].contains)
        }
    }

    /// The rows that `events` lock, as hashes: one per (session, ad) pair and one per event key,
    /// and for a click its session's row too (clicks are decided under it, `CountingState`). Two
    /// rows may share a hash; that only makes a request wait for a later transaction when it need not.
    static func rowKeys(of events: [EventInput]) -> [Int] {
        var keys: [Int] = []
        keys.reserveCapacity(events.count * 2)
        for event in events {
            var pair = Hasher()
            pair.combine(event.sessionID)
            pair.combine(event.adID)
            keys.append(pair.finalize())
            var id = Hasher()
            id.combine(1 as UInt8)  // an event's key: its id within its session (API 1.3)
            id.combine(event.sessionID)
            id.combine(event.eventID)
            keys.append(id.finalize())
            if event.type == .click {
                var session = Hasher()
                session.combine(0 as UInt8)  // not the hash of a pair or an id with the same text
                session.combine(event.sessionID)
                keys.append(session.finalize())
            }
        }
        return keys
    }
}
