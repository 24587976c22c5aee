import AdTally

/// The fixed values of a serving process that are not settings, each chosen once here with its
/// reason (the measurements behind them are in `docs/PERFORMANCE.md`).
enum Tunables {
    /// Connections of the primary's pool held back for the committers: one each, so that readiness
    /// probes, feeds, reports and maintenance together never hold more than the rest, but never more
    /// than half the pool (on Citus there are many committers, and feeds need connections too). A
    /// pool of one connection holds nothing back (it has nothing to spare).
    static func reservedConnections(poolSize: Int, committers: Int) -> Int {
        max(0, min(committers, poolSize - 1, max(1, poolSize / 2)))
    }

    /// How long a request waits for a free pooled connection before it is answered `503`.
    static let acquireTimeout: Duration = .seconds(2)

    /// libpq's `connect_timeout` of a pooled connection, per host of a multi-host URL.
    static let connectTimeoutSeconds = 2

    /// How long a report's statement may wait for its answer: reports scan a lot, so it is longer
    /// than the primary's `ADTALLY_DB_ANSWER_TIMEOUT_SECONDS`.
    static let reportsAnswerTimeout: Duration = .seconds(120)

    /// How long a request's events wait for a committer before they are answered `503`.
    static let commitQueueWait: Duration = .seconds(5)

    /// Routed on Citus (`ShardRouter`): event transactions of one shard's sessions that run at
    /// once. One: the shard's requests that arrive meanwhile go together in its next transaction,
    /// while the committers work on other shards (a node's pool has a connection per committer).
    static let transactionsPerShard = 1

    /// How often the Citus shard map is read again (also at once after a node could not be
    /// reached): how long a moved shard's sessions may still go to its old node (correct, slower).
    static let shardMapRefresh: Duration = .seconds(2)

    /// How often each process asks whether an advertiser key was made or revoked (one row read by
    /// its key): a revoked key is refused everywhere within this and a query's time (API.md
    /// section 13 allows 5 s).
    static let keyringRefresh: Duration = .seconds(1)

    /// How often each process writes the `last_used_at` of the keys it saw used (API.md section 13:
    /// at most 60 s behind).
    static let keyUseWrite: Duration = .seconds(30)
}
