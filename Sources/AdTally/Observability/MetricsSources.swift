import Postgres

/// What the limits per client report to `/metrics`, so that `Metrics` need not know them.
protocol ClientLimitCounts: Sendable {
    /// Requests refused so far by each limit (every limit, zero included), in the series' order.
    var refusalsByLimit: [(limit: String, refusals: UInt64)] { get }
    /// Client addresses remembered now.
    var trackedClients: Int { get }
}

/// What the database of reads reports to `/metrics` when it is one of its own
/// (`ADTALLY_REPORTS_DATABASE_URL`), so that `Metrics` need not know it.
protocol ReportsDatabaseGauges: Sendable {
    /// Its reachability, failed reads and pool; nil when reads share the primary's pool.
    var ownDatabase: (reachable: Bool, failures: UInt64, pool: PostgresPool)? { get }
}
