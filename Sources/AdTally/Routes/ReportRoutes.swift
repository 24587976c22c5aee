import HTTP
import HTTPServer
import Postgres

/// `GET /v1/reports/ads/{ad_id}` and `GET /v1/reports/ads` (API.md section 3), for billing.
///
/// Refusals follow the contract's order: `401`, then `400 invalid_path`, then `400 invalid_query`,
/// all decided in the head check before any database work, then `503` when the database is gone.
/// The listing is streamed (`Transfer-Encoding: chunked`) from a server-side cursor, one batch of
/// rows per chunk, so memory stays flat however many rows it has; there is no `limit`/`cursor`.
///
/// `database` says where reports are read (the primary, or the reports database of
/// `ADTALLY_REPORTS_DATABASE_URL`, normally a hot standby: `database.isStandby`).
struct ReportRoutes: Sendable {
    let checks: RequestChecks
    let database: ReadDatabase
    var store = ReportStore()
    /// The raw-event retention horizon now (`ADTALLY_EVENTS_RETENTION_DAYS` before the clock):
    /// before it, a range bound must be a whole UTC hour (raw rows there may be gone).
    var horizon: @Sendable () -> Timestamp = { Timestamp(microsecondsSinceEpoch: .min) }

    static let adPattern = "/v1/reports/ads/{ad_id}"
    static let listingPattern = "/v1/reports/ads"

    func register(on router: inout Router) {
        router.get(Self.adPattern, headCheck: { context in
            try checks.requireScope(.reports, context)
            _ = try checks.requireIdentifier(context, "ad_id")
            _ = try adQuery(context)
        }, adReport)
        router.get(Self.listingPattern, headCheck: { context in
            try checks.requireScope(.reports, context)
            _ = try listingQuery(context)
        }, listing)
    }

    /// `400 invalid_query` naming the parameter to blame.
    static func invalidQuery(field: String, message: String) -> HTTPError {
        HTTPError(.badRequest, code: "invalid_query", message: message, field: field)
    }

    func adQuery(_ context: RequestContext) throws -> ReportQuery {
        do {
            let query = try ReportQuery.forAd(context.request.query)
            try query.checkHorizon(horizon())
            return query
        } catch {
            throw Self.invalidQuery(field: error.field, message: error.message)
        }
    }

    func listingQuery(_ context: RequestContext) throws -> ReportQuery {
        do {
            let query = try ReportQuery.forListing(context.request.query, accept: context.request.headers["Accept"])
            try query.checkHorizon(horizon())
            return query
        } catch {
            throw Self.invalidQuery(field: error.field, message: error.message)
        }
    }

    @Sendable func adReport(_ context: RequestContext) throws -> HTTPResponse {
        let adID = try checks.requireIdentifier(context, "ad_id")
        let query = try adQuery(context)
        let (report, state) = try database.read { connection in
            let state = try LifecycleState.read(on: connection)
            return (try store.adReport(adID: adID, from: query.from, to: query.to, state: state, on: connection), state)
        }
        var writer = JSONWriter(reservingCapacity: 512)
        writer.beginObject()
        writer.key("ad_id"); writer.string(report.adID)
        writer.key("advertiser_id"); writer.string(report.advertiserID)
        writer.key("from"); writer.string(query.from?.rfc3339)
        writer.key("to"); writer.string(query.to?.rfc3339)
        writer.key("final_before"); writer.string(state.finalBefore.rfc3339)
        ReportListingEncoder.writeCounts(report.counts, to: &writer)
        writer.key("rejections")
        writer.beginObject()
        for (reason, count) in zip(ReportStore.rejectionReasons, report.rejections) {
            writer.key(reason.rawValue); writer.int(count)
        }
        writer.endObject()
        writer.key("duplicates")
        writer.beginObject()
        for (reason, count) in zip(ReportStore.duplicateReasons, report.duplicates) {
            writer.key(reason.rawValue); writer.int(count)
        }
        writer.endObject()
        writer.endObject()
        return .json(.ok, writer.bytes)
    }

    @Sendable func listing(_ context: RequestContext) throws -> HTTPResponse {
        let query = try listingQuery(context)
        // The status line goes out before the first row is read, so ask the database first: when it
        // is gone the answer is still a clean `503`. Should it fail later, mid-stream, the chunked
        // body ends without its last chunk and the client sees a truncated response, not a short one.
        // final_before, read here, goes into the head (CSV) or the opening (JSON). (ReportStore.listing
        // runs its transaction once more when it fails before the first batch, as after a standby's
        // recovery conflict.)
        let state = try database.read { try LifecycleState.read(on: $0) }
        var headers = HTTPHeaders()
        let encoder = ReportListingEncoder(query: query, finalBefore: state.finalBefore)
        headers.add(name: "Content-Type", value: encoder.contentType)
        headers.add(name: "AdTally-Final-Before", value: state.finalBefore.rfc3339)
        let pool = database.pool
        let answerTimeout = database.answerTimeout
        let store = self.store
        return HTTPResponse(status: .ok, headers: headers) { writer in
            var encoder = encoder
            try writer.write(encoder.opening())
            try pool.withConnection(answerTimeout: answerTimeout) { connection in
                try store.listing(query, state: state, on: connection) { rows in try writer.write(encoder.encode(rows)) }
            }
            try writer.write(encoder.closing())
        }
    }
}
