import Contract
import HTTP
import Timestamps

/// The query parameters of the event export, `GET /v1/reports/ads/{ad_id}/events` (API.md section
/// 11), read and validated once, so that the store only ever sees a bounded range of raw rows.
///
/// Reading rules, those of the reports (`ReportQuery`) where section 11 says "as in section 3":
/// - an empty value (`from=`) is the parameter absent; a known parameter given twice (with values)
///   is `invalid_query` naming it; unknown parameters are ignored; values are case-sensitive;
/// - parameters are checked in the order `from`, `to`, `status`, `format`, then the rules between
///   them: a missing bound (field: the missing one, `from` first), `from` after `to` (field `from`;
///   `from` equal to `to` is an empty range, as in the reports), `to - from` over 31 days (field
///   `to`, the bound that makes the range too long); then, in the route with the clock, a bound
///   before the raw-event retention horizon (`checkHorizon`: field the bound, `from` first).
/// - `format` alone chooses the body: the contract names no `Accept` negotiation for the export,
///   so `Accept` is not read (a client that sends `Accept: text/csv` still gets NDJSON).
public struct EventExportQuery: Sendable, Equatable {
    /// Body format: NDJSON (one JSON object a line), or CSV with a header row.
    public enum Format: String, Sendable {
        case ndjson, csv
    }

    /// Inclusive lower bound on `received_at`, to the microsecond.
    public var from: Timestamp
    /// Exclusive upper bound on `received_at`.
    public var to: Timestamp
    /// Only events of this outcome; nil for every event.
    public var status: EventOutcome.Status?
    /// How the body is written (`format`, NDJSON by default).
    public var format: Format

    /// The longest range one export covers: a month of any calendar, so that one request's cost
    /// (every raw row of an ad over the range) stays bounded.
    public static let maximumRange: Int64 = 31 * 86_400 * Timestamp.microsecondsPerSecond

    /// A query as `read` would return it (tests and callers that build one directly).
    public init(from: Timestamp, to: Timestamp, status: EventOutcome.Status? = nil, format: Format = .ndjson) {
        self.from = from
        self.to = to
        self.status = status
        self.format = format
    }

    /// Reads and checks the parameters; the horizon is checked apart (`checkHorizon`), with the clock.
    public static func read(_ parameters: QueryParameters) throws(ReportQuery.Invalid) -> EventExportQuery {
        var bounds: [String: Timestamp] = [:]
        for name in ["from", "to"] {
            guard let raw = try ReportQuery.single(parameters, name) else { continue }
            guard let time = Timestamp(rfc3339: raw) else {
                throw ReportQuery.Invalid(field: name, message: "\(name) must be an RFC 3339 time with an offset, such as 2026-11-29T13:47:00Z (send + as %2B).")
            }
            bounds[name] = time
        }
        var status: EventOutcome.Status?
        if let raw = try ReportQuery.single(parameters, "status") {
            guard let value = EventOutcome.Status(rawValue: raw) else {
                throw ReportQuery.Invalid(field: "status", message: "status must be accepted, duplicate or rejected.")
            }
            status = value
        }
        var format = Format.ndjson
        if let raw = try ReportQuery.single(parameters, "format") {
            guard let value = Format(rawValue: raw) else {
                throw ReportQuery.Invalid(field: "format", message: "format must be ndjson or csv.")
            }
            format = value
        }
        guard let from = bounds["from"] else {
            throw ReportQuery.Invalid(field: "from", message: "from is required: the export covers [from, to), at most 31 days.")
        }
        guard let to = bounds["to"] else {
            throw ReportQuery.Invalid(field: "to", message: "to is required: the export covers [from, to), at most 31 days.")
        }
        guard from <= to else {
            throw ReportQuery.Invalid(field: "from", message: "from must not be after to.")
        }
        // Both bounds lie in years 0000-9999 (Timestamp(rfc3339:)), so the difference cannot overflow.
        guard to.microsecondsSinceEpoch - from.microsecondsSinceEpoch <= maximumRange else {
            throw ReportQuery.Invalid(field: "to", message: "to - from must be at most 31 days; export a longer period in parts.")
        }
        return EventExportQuery(from: from, to: to, status: status, format: format)
    }

    /// Only raw rows can be exported, and those before the retention horizon may be gone: a bound
    /// before it (`ADTALLY_EVENTS_RETENTION_DAYS` before now) is refused, `from` first, with the
    /// horizon in the message.
    public func checkHorizon(_ horizon: Timestamp) throws(ReportQuery.Invalid) {
        for (name, bound) in [("from", from), ("to", to)] where bound < horizon {
            throw ReportQuery.Invalid(field: name, message: "\(name) lies before the raw-event retention horizon \(horizon.rfc3339): the export reads raw events, which are kept only after it.")
        }
    }
}
