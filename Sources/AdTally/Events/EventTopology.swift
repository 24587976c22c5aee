import Postgres

/// Where event transactions run and how their statements name their sessions: one value, chosen
/// once at start from the database `DATABASE_URL` names (and `ADTALLY_CITUS_ROUTING`), that the
/// ingestor, the store and every statement builder of the event path ask, instead of flags threaded
/// through them (docs/SCALING.md says why each choice is what it is).
public enum EventTopology: Sendable {
    /// One PostgreSQL: a transaction takes whatever is queued (group commit's whole point), and the
    /// rows go by two inserts of array parameters.
    case plain
    /// Citus, every transaction through `DATABASE_URL`'s node: a transaction holds one session's
    /// requests (one shard, one-phase commit), and each session's rows go by one call of
    /// `adtally_store_events`, which Citus delegates to the session's shard.
    case citus
    /// Citus with the shard map (`ShardRouter`): a transaction holds the requests of one shard's
    /// sessions and runs on the node that holds it, where the rows go by one statement pair for the
    /// transaction. A request the map cannot place goes as under `.citus`.
    case routedCitus(ShardRouter)

    /// Whether a transaction takes only requests of one group (`TransactionGroup`).
    var groupsTransactions: Bool {
        if case .plain = self { return false }
        return true
    }

    /// The shard map, when transactions are routed.
    public var router: ShardRouter? {
        if case .routedCitus(let router) = self { return router }
        return nil
    }

    /// The group a request's `sessionIDs` put it in: on routed Citus the shard (or, for several
    /// shards, the node) that holds every one of them when the map knows it; else, on Citus, their
    /// one session (a transaction through `DATABASE_URL`'s node that touches its shard only), else
    /// none (a transaction of its own). Nil on plain PostgreSQL, where nothing is grouped.
    func group(of sessionIDs: [String]) -> TransactionGroup? {
        guard groupsTransactions else { return nil }
        if let router, let place = router.place(sessionIDs) {
            return place.shard.map { .shard($0, node: place.group) } ?? .node(place.group)
        }
        return Self.onlySession(sessionIDs).map { .session($0) }
    }

    /// How a transaction's rule-5 rows are sent; `onShardNode`: it runs on the node of its shard.
    func rowForm(onShardNode: Bool) -> EventStore.RowForm {
        switch self {
        case .plain: .arrays
        case .citus: .callPerSession
        case .routedCitus: onShardNode ? .onShardNode : .callPerSession
        }
    }

    /// Committer threads of group commit for a pool of `poolSize` connections. On PostgreSQL group
    /// commit wants few, large transactions: each committer takes everything queued, so two keep
    /// the database busy (one works while the other waits for its `COMMIT` to reach the disk); more
    /// only split the batches. On Citus a transaction holds one group's requests, so concurrent
    /// sessions need transactions of their own, on their shards in parallel: all but two
    /// connections, at most 16. The other connections serve feeds, reports and probes.
    public func committers(poolSize: Int) -> Int {
        switch self {
        case .plain: max(1, min(2, poolSize - 1))
        case .citus, .routedCitus: max(1, min(poolSize - 2, 16))
        }
    }

    /// The condition that filters a statement's rows by their sessions: `column = the session`
    /// when they have one, which makes the statement a router query on Citus; for several, on
    /// Citus, `column = ANY (the sessions)`, so that Citus prunes it to their shards (each run
    /// locally when they are on the node the transaction runs on) where the join alone would send
    /// it to every shard; on PostgreSQL, true, in a text that is the same whatever the sessions.
    func sessionFilter(_ sessionIDs: [String], column: StaticString) -> PostgresQuery {
        let only = Self.onlySession(sessionIDs)
        if groupsTransactions, only == nil, !sessionIDs.isEmpty {
            let named = Array(Set(sessionIDs))
            return "\(unsafeSQL: column) = ANY (\(PostgresBinaryArray.text(named))::text[])"
        }
        return "(\(only)::text IS NULL OR \(unsafeSQL: column) = \(only))"
    }

    /// The one session of a statement's rows, nil when they have several (or none).
    static func onlySession(_ sessionIDs: [String]) -> String? {
        guard let first = sessionIDs.first, sessionIDs.allSatisfy({ $0 == first }) else { return nil }
        return first
    }
}
