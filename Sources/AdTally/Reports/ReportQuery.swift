import Contract
import HTTP
import Timestamps

/// The query parameters of the report endpoints (API.md section 3), read and validated once so
/// that the SQL layer only ever sees a well-formed range, filter and bucket size.
///
/// Reading rules (the contract's, plus the choices it leaves open):
/// - an empty value (`from=`) is the parameter absent; empties are dropped before repeats are
///   counted, so `from=&from=2026-11-01T00:00:00Z` is one `from`;
/// - a known parameter given twice (with values) is `invalid_query` naming it;
/// - parameters are checked in the order `from`, `to`, `advertiser_id`, `granularity`, `format`,
///   `tz`, then the rules between them: `from` after `to` (field `from`), `granularity=hour`
///   without a bound (field: the missing one, `from` first) or over 10,000 hours (field
///   `granularity`);
/// - unknown parameters are ignored; values are case-sensitive.
public struct ReportQuery: Sendable, Equatable {
    /// Bucket size of a listing; buckets are local hours, days or months of `tz`.
    public enum Granularity: String, Sendable, CaseIterable {
        case total, day, hour, month
    }

    /// Body format of a listing.
    public enum Format: String, Sendable {
        case json, csv
    }

    /// Inclusive lower bound on `received_at`, to the microsecond; nil is unbounded.
    public var from: Timestamp?
    /// Exclusive upper bound on `received_at`; nil is unbounded.
    public var to: Timestamp?
    /// Only ads of this advertiser (listing only).
    public var advertiserID: String?
    /// Listing bucket size (listing only).
    public var granularity: Granularity
    /// Listing body format, from `format` or else `Accept` (listing only).
    public var format: Format
    /// The IANA time zone of the buckets (API 1.3), `UTC` by default; checked against the known
    /// zones by the route (`KnownZones`).
    public var tz: ZoneName

    /// The longest range `granularity=hour` may cover.
    public static let maximumHourBuckets: Int64 = 10_000

    public init(from: Timestamp? = nil, to: Timestamp? = nil, advertiserID: String? = nil,
                granularity: Granularity = .total, format: Format = .json, tz: ZoneName = .utc) {
        self.from = from
        self.to = to
        self.advertiserID = advertiserID
        self.granularity = granularity
        self.format = format
        self.tz = tz
    }

    /// Why a query was refused: the parameter to blame and a message for a human.
    public struct Invalid: Error, Sendable, Equatable {
        public let field: String
        public let message: String
    }

    /// The single-ad report's parameters: `from`, `to` and `tz`.
    public static func forAd(_ parameters: QueryParameters) throws(Invalid) -> ReportQuery {
        var query = ReportQuery()
        try query.readRange(parameters)
        try query.readZone(parameters)
        try query.checkRange()
        return query
    }

    /// `tz`: an IANA name in form (whether the server knows it is the route's check).
    private mutating func readZone(_ parameters: QueryParameters) throws(Invalid) {
        guard let raw = try Self.single(parameters, "tz") else { return }
        guard let zone = ZoneName(raw) else { throw Self.unknownZone(raw) }
        tz = zone
    }

    /// `400 invalid_query` for a `tz` the server does not know.
    static func unknownZone(_ zone: some StringProtocol) -> Invalid {
        Invalid(field: "tz", message: "tz must be an IANA time zone name the server knows, such as Asia/Kolkata or America/New_York (got \(zone.prefix(64))).")
    }

    /// The listing's parameters; `accept` is the request's `Accept` header, used when `format` is absent.
    public static func forListing(_ parameters: QueryParameters, accept: String?) throws(Invalid) -> ReportQuery {
        try read(parameters, accept: accept, readsGranularity: true)
    }

    /// The credits listing's parameters (API.md section 10): the listing's without `granularity`,
    /// which, like any parameter it does not have, it ignores.
    public static func forCredits(_ parameters: QueryParameters, accept: String?) throws(Invalid) -> ReportQuery {
        try read(parameters, accept: accept, readsGranularity: false)
    }

    private static func read(_ parameters: QueryParameters, accept: String?, readsGranularity: Bool) throws(Invalid) -> ReportQuery {
        var query = ReportQuery()
        try query.readRange(parameters)
        if let advertiser = try single(parameters, "advertiser_id") {
            guard Identifier.isWellFormed(advertiser) else {
                throw Invalid(field: "advertiser_id", message: "advertiser_id must be \(Identifier.form).")
            }
            query.advertiserID = advertiser
        }
        if readsGranularity, let raw = try single(parameters, "granularity") {
            guard let granularity = Granularity(rawValue: raw) else {
                throw Invalid(field: "granularity", message: "granularity must be total, hour, day or month.")
            }
            query.granularity = granularity
        }
        if let raw = try single(parameters, "format") {
            guard let format = Format(rawValue: raw) else {
                throw Invalid(field: "format", message: "format must be json or csv.")
            }
            query.format = format
        } else if let accept, MediaType.prefersCSV(accept: accept) {
            query.format = .csv
        }
        try query.readZone(parameters)
        try query.checkRange()
        if query.granularity == .hour {
            guard let from = query.from else {
                throw Invalid(field: "from", message: "granularity=hour needs both from and to.")
            }
            guard let to = query.to else {
                throw Invalid(field: "to", message: "granularity=hour needs both from and to.")
            }
            let limit = maximumHourBuckets * 3_600 * Timestamp.microsecondsPerSecond
            // Both bounds lie in years 0000-9999, so the difference cannot overflow.
            guard to.microsecondsSinceEpoch - from.microsecondsSinceEpoch <= limit else {
                throw Invalid(field: "granularity", message: "granularity=hour covers at most 10000 hours; narrow from and to or use day.")
            }
        }
        return query
    }

    private mutating func readRange(_ parameters: QueryParameters) throws(Invalid) {
        for name in ["from", "to"] {
            guard let raw = try Self.single(parameters, name) else { continue }
            guard let time = Timestamp(rfc3339: raw) else {
                throw Invalid(field: name, message: "\(name) must be an RFC 3339 time with an offset, such as 2026-11-29T13:47:00Z (send + as %2B).")
            }
            if name == "from" { from = time } else { to = time }
        }
    }

    /// Before the raw-event retention horizon only whole quarter hours can be counted exactly (the
    /// raw rows there may be gone; the quarter-hour rollups are kept forever, and every zone's hours
    /// and days start on one), so a bound before it must be one; the message names the horizon.
    public func checkHorizon(_ horizon: Timestamp) throws(Invalid) {
        for (name, bound) in [("from", from), ("to", to)] {
            guard let bound, bound < horizon, bound.microsecondsSinceEpoch % ReportSpans.quarter != 0 else { continue }
            throw Invalid(field: name, message: "\(name) lies before the raw-event retention horizon \(horizon.rfc3339): before it, bounds must be whole quarter hours (UTC :00, :15, :30 or :45, no seconds).")
        }
    }

    /// A plan that would split an hour of the history kept only per hour (`ReportSpans`): the
    /// bound (or, for a bucket's edge, `tz`) to blame.
    static func splitting(_ error: ReportSpans.Unanswerable, from: Timestamp?, to: Timestamp?) -> Invalid {
        let field = error.at == from?.microsecondsSinceEpoch ? "from" : error.at == to?.microsecondsSinceEpoch ? "to" : "tz"
        let end = Timestamp(microsecondsSinceEpoch: error.quartersFrom).rfc3339
        return Invalid(field: field, message: "before \(end) the counts are kept per whole UTC hour (their raw rows are gone): there, \(field == "tz" ? "buckets must start on whole UTC hours (a zone whose offset is a whole number of hours)" : "\(field) must be a whole UTC hour").")
    }

    private func checkRange() throws(Invalid) {
        if let from, let to, from > to {
            throw Invalid(field: "from", message: "from must not be after to.")
        }
    }

    /// The one non-empty value of `name`, nil when absent; `Invalid` when given more than once.
    static func single(_ parameters: QueryParameters, _ name: String) throws(Invalid) -> String? {
        let values = parameters.values(for: name).filter { !$0.isEmpty }
        guard values.count <= 1 else {
            throw Invalid(field: name, message: "\(name) is given more than once.")
        }
        return values.first
    }
}
