import HTTP
import HTTPServer
import Postgres
import Timestamps

/// `GET /v1/reports/ads/{ad_id}/events` (API.md section 11): the events behind a count, for an
/// advertiser's audit or a disputed invoice, with the reports scope.
///
/// Refusals follow the contract's order, as the other reports': `401`/`403`, then `400
/// invalid_path`, then `400 invalid_query`, all decided in the head check before any database work,
/// then `503` when the database is gone (before the status line goes out). The body is streamed
/// (`Transfer-Encoding: chunked`) from a server-side cursor, one batch of rows per chunk, and every
/// write gives up at `maxDuration` after the request (`ADTALLY_REPORT_MAX_SECONDS`), as listings do.
///
/// An ad with no events in the range, or one never seen at all, answers `200` with an empty body
/// (CSV: the header alone), as the single-ad report answers zeros rather than `404`: the export is
/// the explanation of that report's counts, and an empty one explains zeros. To an advertiser's key
/// (API.md section 13), only its own ads: any other is `404`, and each row names its session by
/// `session_ref`, with `snapshot_id` null.
public struct EventExportRoutes: Sendable {
    let database: ReadDatabase
    var store = EventExportStore()
    /// The raw-event retention horizon now (`ADTALLY_EVENTS_RETENTION_DAYS` before the clock):
    /// raw rows before it may be gone, so a bound before it is refused.
    var horizon: @Sendable () -> Timestamp = { Timestamp(microsecondsSinceEpoch: .min) }
    /// How long an export may take to be read whole (`ADTALLY_REPORT_MAX_SECONDS`).
    let maxDuration: Duration
    /// The key of an advertiser's `session_ref`s, read once.
    let sessionRefs = SessionRefs()

    public init(database: ReadDatabase, horizon: @escaping @Sendable () -> Timestamp, maxDuration: Duration) {
        self.database = database
        self.horizon = horizon
        self.maxDuration = maxDuration
    }

    static let pattern = "/v1/reports/ads/{ad_id}/events"

    public func register(on edge: inout Edge) {
        edge.add(.get, Self.pattern, .reports) { request in
            guard let adID = request.path["ad_id"] else { throw APIError.invalidPath("ad_id") }
            let query = try query(request.context)
            let scope = ReportScope(request.principal)
            return .onWorker { _ in try export(adID, query, scope: scope) }
        }
    }

    func query(_ context: RequestContext) throws -> EventExportQuery {
        do throws(ReportQuery.Invalid) {
            let query = try EventExportQuery.read(context.request.query)
            try query.checkHorizon(horizon())
            return query
        } catch {
            throw ReportRoutes.invalidQuery(error)
        }
    }

    func export(_ adID: String, _ query: EventExportQuery, scope: ReportScope) throws -> HTTPResponse {
        let deadline = ContinuousClock.now + maxDuration
        // The status line goes out before the first row is read, so ask the database first: when
        // it is gone the answer is still a clean `503`. final_before, read here before the
        // export's snapshot, goes into the head: every event received before it is in the body.
        // Should the database fail later, mid-stream, the body ends without its last chunk (or,
        // for HTTP/1.0, the connection closes early): the client sees a truncated response.
        // An advertiser's key: its own ad or `404` (another's or one never registered, alike), and
        // the key of its session_refs.
        let (finalBefore, refs) = try database.read { connection -> (Timestamp, SessionRefs.Keyed?) in
            let finalBefore = try LifecycleState.read(on: connection).finalBefore
            guard case .advertiser = scope else { return (finalBefore, nil) }
            let owner = try connection.query("SELECT advertiser_id FROM ads WHERE ad_id = \(adID)").first?.decode(String.self, at: 0)
            guard scope.admits(owner) else { throw ReportRoutes.notVisible(adID) }
            return (finalBefore, try sessionRefs.keyed(on: connection))
        }
        let encoder = EventExportEncoder(format: query.format, sessionRefs: scope.advertiserID != nil)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: encoder.contentType)
        headers.add(name: "AdTally-Final-Before", value: finalBefore.rfc3339)
        let pool = database.pool
        let answerTimeout = database.answerTimeout
        let store = self.store
        return HTTPResponse(status: .ok, headers: headers) { writer in
            // Every write gives up at the deadline (a client that does not read): the body is cut
            // short and the transaction rolled back as the error leaves the export.
            let opening = encoder.opening()
            if !opening.isEmpty { try writer.write(opening, before: deadline) }
            try pool.withConnection(answerTimeout: answerTimeout) { connection in
                try store.export(adID: adID, query, scope: scope, refs: refs, on: connection) { rows in
                    try writer.write(encoder.encode(rows), before: deadline)
                }
            }
        }
    }
}
