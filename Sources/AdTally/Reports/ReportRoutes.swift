import HTTP
import HTTPServer
import JSON
import Postgres
import Timestamps

/// `GET /v1/reports/ads/{ad_id}` and `GET /v1/reports/ads` (API.md section 3), for billing.
///
/// Refusals follow the contract's order: `401`, then `400 invalid_path`, then `400 invalid_query`,
/// all decided in the head check before any database work, then `503` when the database is gone.
/// The listing is streamed (`Transfer-Encoding: chunked`) from a server-side cursor, one batch of
/// rows per chunk, so memory stays flat however many rows it has; there is no `limit`/`cursor`.
///
/// `database` says where reports are read (the primary, or the reports database of
/// `ADTALLY_REPORTS_DATABASE_URL`, normally a hot standby: `database.isStandby`).
public struct ReportRoutes: Sendable {
    let database: ReadDatabase
    var store = ReportStore()
    /// The raw-event retention horizon now (`ADTALLY_EVENTS_RETENTION_DAYS` before the clock):
    /// before it, a range bound must be a whole quarter hour (raw rows there may be gone).
    var horizon: @Sendable () -> Timestamp = { Timestamp(microsecondsSinceEpoch: .min) }
    /// How long a listing may take to be read whole (`ADTALLY_REPORT_MAX_SECONDS`).
    let maxDuration: Duration
    /// The zone names PostgreSQL knows, read on the first report.
    var zones = KnownZones()
    /// Asks maintenance to keep daily rollups for a zone's local days (once per zone and process;
    /// on the primary, wherever reports are read).
    var registerZone: @Sendable (String) -> Void = { _ in }

    public init(database: ReadDatabase, horizon: @escaping @Sendable () -> Timestamp, maxDuration: Duration,
                registerZone: @escaping @Sendable (String) -> Void) {
        self.database = database
        self.horizon = horizon
        self.maxDuration = maxDuration
        self.registerZone = registerZone
    }

    static let adPattern = "/v1/reports/ads/{ad_id}"
    static let listingPattern = "/v1/reports/ads"

    public func register(on edge: inout Edge) {
        edge.add(.get, Self.adPattern, .reports) { request in
            guard let adID = request.path["ad_id"] else { throw APIError.invalidPath("ad_id") }
            let query = try adQuery(request.context)
            let scope = ReportScope(request.principal)
            return .onWorker { _ in try adReport(adID, query, scope: scope) }
        }
        edge.add(.get, Self.listingPattern, .reportsListing) { request in
            let query = try listingQuery(request.context)
            let scope = ReportScope(request.principal)
            return .onWorker { _ in try listing(query, scope: scope) }
        }
    }

    /// `400 invalid_query` naming the parameter to blame.
    static func invalidQuery(_ error: ReportQuery.Invalid) -> APIError {
        APIError(.invalidQuery, error.message, field: error.field)
    }

    func adQuery(_ context: RequestContext) throws -> ReportQuery {
        do throws(ReportQuery.Invalid) {
            let query = try ReportQuery.forAd(context.request.query)
            try query.checkHorizon(horizon())
            if zones.contains(query.tz) == false { throw ReportQuery.unknownZone(query.tz.name) }
            return query
        } catch {
            throw Self.invalidQuery(error)
        }
    }

    func listingQuery(_ context: RequestContext) throws -> ReportQuery {
        do throws(ReportQuery.Invalid) {
            let query = try ReportQuery.forListing(context.request.query, accept: context.request.headers["Accept"])
            try query.checkHorizon(horizon())
            if zones.contains(query.tz) == false { throw ReportQuery.unknownZone(query.tz.name) }
            return query
        } catch {
            throw Self.invalidQuery(error)
        }
    }

    /// Checks the zone against PostgreSQL's names (read now if the head check could not).
    private func checkZone(_ query: ReportQuery, on connection: PostgresConnection) throws {
        try zones.load(on: connection)
        guard zones.contains(query.tz) == true else { throw Self.invalidQuery(ReportQuery.unknownZone(query.tz.name)) }
    }

    /// `404 not_found` for an ad an advertiser key may not see (another's, or one never
    /// registered): the same answer either way, so a key learns nothing of other advertisers' ads.
    static func notVisible(_ adID: String) -> APIError {
        APIError.notFound("No ad \(adID) of this advertiser.")
    }

    /// `403 forbidden` for a key that asked for another advertiser's rows (the edge refuses it
    /// first; this is the store's own check).
    static func forbidden(_ error: ReportScope.Forbidden) -> APIError {
        APIError(.forbidden, "This advertiser key sees only its own advertiser's ads, not those of \(error.advertiserID).")
    }

    func adReport(_ adID: String, _ query: ReportQuery, scope: ReportScope) throws -> HTTPResponse {
        let (report, finalBefore): (ReportStore.AdReport, Timestamp)
        do {
            let answer = try database.read { connection in
                try checkZone(query, on: connection)
                // final_before first, in a statement of its own; the counts in a later snapshot.
                let finalBefore = try LifecycleState.finalBefore(on: connection)
                return try store.adReport(adID: adID, scope: scope, from: query.from, to: query.to, finalBefore: finalBefore, on: connection)
            }
            guard let answer else { throw Self.notVisible(adID) }
            (report, finalBefore) = answer
        } catch let error as ReportQuery.Invalid {
            throw Self.invalidQuery(error)
        }
        // Daily rollups for this zone's days from now on (once per process, on the primary).
        if !query.tz.isUTC { registerZone(query.tz.name) }
        var writer = JSONWriter(reservingCapacity: 768)
        writer.beginObject()
        writer.key("ad_id"); writer.string(report.adID)
        writer.key("advertiser_id"); writer.string(report.advertiserID)
        writer.key("from"); writer.string(query.from?.rfc3339)
        writer.key("to"); writer.string(query.to?.rfc3339)
        writer.key("tz"); writer.string(query.tz.name)
        writer.key("final_before"); writer.string(finalBefore.rfc3339)
        writer.key("final"); writer.bool(query.to.map { $0 <= finalBefore } ?? false)
        ReportListingEncoder.writeCounts(report.counts, to: &writer)
        ReportListingEncoder.writeReasons(report.values, to: &writer)
        writer.endObject()
        return .json(.ok, writer.bytes)
    }

    func listing(_ query: ReportQuery, scope: ReportScope) throws -> HTTPResponse {
        let deadline = ContinuousClock.now + maxDuration
        var query = query
        do throws(ReportScope.Forbidden) {
            query.advertiserID = try scope.listingAdvertiser(query.advertiserID)
        } catch {
            throw Self.forbidden(error)
        }
        // The status line goes out before the first row is read, so ask the database first: when it
        // is gone the answer is still a clean `503`, and a range the history cannot answer a `400`.
        // Should it fail later, mid-stream, the body ends without its last chunk (or, for HTTP/1.0,
        // the connection closes early) and the client sees a truncated response, not a short one.
        // final_before, read here before the listing's snapshot, goes into the head (CSV) or the
        // opening (JSON). (ReportStore.listing runs its transaction once more when it fails before
        // the first batch, as after a standby's recovery conflict.)
        let (state, zone): (LifecycleState, ZoneRules)
        do {
            (state, zone) = try database.read { connection in
                try checkZone(query, on: connection)
                let state = try LifecycleState.read(on: connection)
                var zone = ZoneRules.utc
                let lower = query.from?.microsecondsSinceEpoch ?? state.rollups.lowerExtent
                let upper = query.to?.microsecondsSinceEpoch ?? state.rollups.upperExtent
                if !query.tz.isUTC, query.granularity != .total, lower < upper {
                    zone = try KnownZones.rules(from: try connection.query(KnownZones.rulesQuery(zone: query.tz, lower: lower, upper: upper)))
                }
                // A range that would split an hour kept only per hour is refused now.
                _ = try ReportSpans(from: query.from?.microsecondsSinceEpoch, to: query.to?.microsecondsSinceEpoch,
                                    unit: query.granularity.unit, zone: zone, state: state.rollups)
                return (state, zone)
            }
        } catch let error as ReportSpans.Unanswerable {
            throw Self.invalidQuery(ReportQuery.splitting(error, from: query.from, to: query.to))
        }
        if !query.tz.isUTC { registerZone(query.tz.name) }
        var headers = HTTPHeaders()
        let encoder = ReportListingEncoder(query: query, finalBefore: state.finalBefore, zone: zone)
        headers.add(name: "Content-Type", value: encoder.contentType)
        headers.add(name: "AdTally-Final-Before", value: state.finalBefore.rfc3339)
        let pool = database.pool
        let answerTimeout = database.answerTimeout
        let store = self.store
        let finalBefore = state.finalBefore
        let scoped = query
        return HTTPResponse(status: .ok, headers: headers) { writer in
            var encoder = encoder
            // Every write gives up at the deadline (a client that does not read): the body is cut
            // short and the transaction rolled back as the error leaves the listing.
            try writer.write(encoder.opening(), before: deadline)
            try pool.withConnection(answerTimeout: answerTimeout) { connection in
                try store.listing(scoped, scope: scope, finalBefore: finalBefore, zone: zone, on: connection) { rows in
                    try writer.write(encoder.encode(rows), before: deadline)
                }
            }
            try writer.write(encoder.closing(), before: deadline)
        }
    }
}
