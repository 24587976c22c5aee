import Contract
import Postgres

/// The counts a report answers, each defined once as a filter over stored events (`e`): rollups fold
/// exactly these per hour (`Rollups`), reports sum them from the rollups and count raw rows with the
/// same filters, so the two can never disagree. The raw names are the rollup tables' column names
/// (migrations 0005 and 0010) and the reports' member names; the order is the contract's (the six
/// totals, the nine rejection reasons, the three duplicate reasons).
enum CountColumn: String, CaseIterable, Sendable {
    case impressions
    case clicks
    case duplicateImpressions = "duplicate_impressions"
    case rejectedImpressions = "rejected_impressions"
    case duplicateClicks = "duplicate_clicks"
    case rejectedClicks = "rejected_clicks"
    case adNotInFeed = "ad_not_in_feed"
    case staleSnapshot = "stale_snapshot"
    case positionMismatch = "position_mismatch"
    case notViewable = "not_viewable"
    case adNotServed = "ad_not_served"
    case noImpression = "no_impression"
    case clickLimitExceeded = "click_limit_exceeded"
    case botAgent = "bot_agent"
    case blockedAddress = "blocked_address"
    case impressionAlreadyCounted = "impression_already_counted"
    case clickWithinWindow = "click_within_window"
    case simultaneousClick = "simultaneous_click"

    /// The nine rejection reasons every report lists, in the contract's order.
    static let rejectionReasons: [EventOutcome.Reason] = [.adNotInFeed, .staleSnapshot, .positionMismatch, .notViewable, .adNotServed,
                                                          .noImpression, .clickLimitExceeded, .botAgent, .blockedAddress]
    /// The three duplicate reasons every report lists, in the contract's order.
    static let duplicateReasons: [EventOutcome.Reason] = [.impressionAlreadyCounted, .clickWithinWindow, .simultaneousClick]

    /// Which stored events this column counts, as a predicate over `events e`. The six totals go
    /// by type and status whatever the reason; the others by reason. Static text: the one
    /// definition of each count, which every statement that counts interpolates.
    var filter: StaticString {
        switch self {
        case .impressions: "e.type = 'impression' AND e.status = 'accepted'"
        case .clicks: "e.type = 'click' AND e.status = 'accepted'"
        case .duplicateImpressions: "e.type = 'impression' AND e.status = 'duplicate'"
        case .rejectedImpressions: "e.type = 'impression' AND e.status = 'rejected'"
        case .duplicateClicks: "e.type = 'click' AND e.status = 'duplicate'"
        case .rejectedClicks: "e.type = 'click' AND e.status = 'rejected'"
        case .adNotInFeed: "e.status = 'rejected' AND e.reason = 'ad_not_in_feed'"
        case .staleSnapshot: "e.status = 'rejected' AND e.reason = 'stale_snapshot'"
        case .positionMismatch: "e.status = 'rejected' AND e.reason = 'position_mismatch'"
        case .notViewable: "e.status = 'rejected' AND e.reason = 'not_viewable'"
        case .adNotServed: "e.status = 'rejected' AND e.reason = 'ad_not_served'"
        case .noImpression: "e.status = 'rejected' AND e.reason = 'no_impression'"
        case .clickLimitExceeded: "e.status = 'rejected' AND e.reason = 'click_limit_exceeded'"
        case .botAgent: "e.status = 'rejected' AND e.reason = 'bot_agent'"
        case .blockedAddress: "e.status = 'rejected' AND e.reason = 'blocked_address'"
        case .impressionAlreadyCounted: "e.status = 'duplicate' AND e.reason = 'impression_already_counted'"
        case .clickWithinWindow: "e.status = 'duplicate' AND e.reason = 'click_within_window'"
        case .simultaneousClick: "e.status = 'duplicate' AND e.reason = 'simultaneous_click'"
        }
    }

    /// The column's name in the rollup tables and the reports (its raw value), as static text.
    var sqlName: StaticString {
        switch self {
        case .impressions: "impressions"
        case .clicks: "clicks"
        case .duplicateImpressions: "duplicate_impressions"
        case .rejectedImpressions: "rejected_impressions"
        case .duplicateClicks: "duplicate_clicks"
        case .rejectedClicks: "rejected_clicks"
        case .adNotInFeed: "ad_not_in_feed"
        case .staleSnapshot: "stale_snapshot"
        case .positionMismatch: "position_mismatch"
        case .notViewable: "not_viewable"
        case .adNotServed: "ad_not_served"
        case .noImpression: "no_impression"
        case .clickLimitExceeded: "click_limit_exceeded"
        case .botAgent: "bot_agent"
        case .blockedAddress: "blocked_address"
        case .impressionAlreadyCounted: "impression_already_counted"
        case .clickWithinWindow: "click_within_window"
        case .simultaneousClick: "simultaneous_click"
        }
    }

    /// The reason a per-reason column counts.
    var reason: EventOutcome.Reason? { EventOutcome.Reason(rawValue: rawValue) }

    /// Whether the hourly and daily rollups of before migration 0010 have this column: the four
    /// reasons of API 1.3 came with it, so no event folded there has them (they count zero).
    var inLegacyRollups: Bool {
        switch self {
        case .noImpression, .clickLimitExceeded, .botAgent, .blockedAddress: return false
        default: return true
        }
    }

    // The fragments below are made only from this type's static names and filters.

    /// `count(*) FILTER (...) AS name, ...` over raw rows, every column in order.
    static let rawCounts = allCases.map { "count(*) FILTER (WHERE \(unsafeSQL: $0.filter)) AS \(unsafeSQL: $0.sqlName)" as PostgresQuery }
        .joined(separator: ",\n")
    /// `x.name, ...`: a rollup row's columns, in order.
    static let rollupColumns = columns(prefix: "x.")
    /// `x.name, ..., 0::bigint, ...`: a row of the rollups of before 0010, with zeros for the
    /// columns they do not have.
    static let legacyRollupColumns = allCases.map { column -> PostgresQuery in
        column.inLegacyRollups ? "x.\(unsafeSQL: column.sqlName)" : "0::bigint AS \(unsafeSQL: column.sqlName)"
    }.joined(separator: ", ")
    /// `name, ...`: the plain column names, in order.
    static let names = columns(prefix: "")
    /// `adtally_sum(name) AS name, ...`: bigint sums that stay bigint (migration 0008; a sum of
    /// nothing is 0, not NULL).
    static let sums = allCases.map { "adtally_sum(\(unsafeSQL: $0.sqlName)) AS \(unsafeSQL: $0.sqlName)" as PostgresQuery }.joined(separator: ",\n")
    /// `adtally_sum(x.name), ...`: a fold of rollup rows into a coarser one.
    static let rollupSums = allCases.map { "adtally_sum(x.\(unsafeSQL: $0.sqlName))" as PostgresQuery }.joined(separator: ", ")
    /// `name = t.name + excluded.name, ...`: an upsert into `table` that adds a fold's counts to a row's.
    static func addingExcluded(table: StaticString) -> PostgresQuery {
        allCases.map { column -> PostgresQuery in
            "\(unsafeSQL: column.sqlName) = \(unsafeSQL: table).\(unsafeSQL: column.sqlName) + excluded.\(unsafeSQL: column.sqlName)"
        }.joined(separator: ", ")
    }
    /// The six totals, whose sum is every stored event once.
    static let totals: [CountColumn] = [.impressions, .clicks, .duplicateImpressions, .rejectedImpressions, .duplicateClicks, .rejectedClicks]
    /// The sum of the six totals over `prefix`'s columns: every stored event once.
    static func eventsIn(prefix: StaticString) -> PostgresQuery {
        totals.map { "\(unsafeSQL: prefix)\(unsafeSQL: $0.sqlName)" as PostgresQuery }.joined(separator: " + ")
    }

    /// Every column's name after `prefix` (`x.`), in order.
    static func columns(prefix: StaticString) -> PostgresQuery {
        allCases.map { "\(unsafeSQL: prefix)\(unsafeSQL: $0.sqlName)" as PostgresQuery }.joined(separator: ", ")
    }
}

/// Every count of one report row, in `CountColumn` order.
public struct CountValues: Sendable, Equatable {
    public var values: [Int64]

    public init(_ values: [Int64]) {
        self.values = values
    }

    /// Reads the columns in order from `columns`.
    init(_ columns: inout PostgresColumns) throws {
        values = try CountColumn.allCases.map { _ in try columns.next(Int64.self) }
    }

    subscript(_ column: CountColumn) -> Int64 {
        guard let index = CountColumn.allCases.firstIndex(of: column), values.indices.contains(index) else { return 0 }
        return values[index]
    }

    /// Rejected events per reason, in `CountColumn.rejectionReasons` order.
    public var rejections: [Int64] { CountColumn.rejectionReasons.map { reason in CountColumn(rawValue: reason.rawValue).map { self[$0] } ?? 0 } }
    /// Duplicate events per reason, in `CountColumn.duplicateReasons` order.
    public var duplicates: [Int64] { CountColumn.duplicateReasons.map { reason in CountColumn(rawValue: reason.rawValue).map { self[$0] } ?? 0 } }
}
