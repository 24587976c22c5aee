import HTTP
import HTTPServer
import JSON
import Postgres
import Timestamps

/// Credits (API.md section 10): `POST /v1/adjustments` (a token with every scope),
/// `GET /v1/adjustments/{adjustment_id}` and `GET /v1/reports/credits` (reports scope).
public struct CreditRoutes: Sendable {
    /// The primary: adjustments are made there.
    let pool: PostgresPool
    /// Where reports are read.
    let reads: ReadDatabase
    let store: AdjustmentStore
    /// The raw-event retention horizon now.
    let horizon: @Sendable () -> Timestamp
    let metrics: any CreditMetrics

    public init(pool: PostgresPool, reads: ReadDatabase, limit: StatementLimit, horizon: @escaping @Sendable () -> Timestamp,
                metrics: any CreditMetrics) {
        self.pool = pool
        self.reads = reads
        self.store = AdjustmentStore(limit: limit)
        self.horizon = horizon
        self.metrics = metrics
    }

    static let adjustmentsPattern = "/v1/adjustments"
    static let adjustmentPattern = "/v1/adjustments/{adjustment_id}"
    static let creditsPattern = "/v1/reports/credits"

    public func register(on edge: inout Edge) {
        edge.add(.post, Self.adjustmentsPattern, .admin(jsonBody: true)) { _ in .onWorker(make) }
        edge.add(.get, Self.adjustmentPattern, .token(.reports)) { request in
            guard let adjustmentID = request.path["adjustment_id"] else { throw APIError.invalidPath("adjustment_id") }
            return .onWorker { _ in try read(adjustmentID) }
        }
        edge.add(.get, Self.creditsPattern, .reportsListing) { request in
            let query = try creditsQuery(request.context)
            let scope = ReportScope(request.principal)
            return .onWorker { _ in try credits(query, scope: scope) }
        }
    }

    static func invalidAdjustment(_ error: AdjustmentRequest.Invalid) -> APIError {
        APIError(.invalidAdjustment, error.message, field: error.field)
    }

    @Sendable func make(_ context: RequestContext) throws -> HTTPResponse {
        let request: AdjustmentRequest
        do {
            request = try AdjustmentRequest.decode(body: context.request.body)
        } catch {
            switch error {
            case .malformedJSON(let message): throw APIError(.malformedJSON, message)
            case .invalid(let invalid): throw Self.invalidAdjustment(invalid)
            }
        }
        let outcome: AdjustmentStore.Outcome
        do {
            outcome = try pool.withConnection(answerTimeout: store.limit.answerTimeout) { connection in
                try store.make(request, horizon: horizon(), on: connection)
            }
        } catch let invalid as AdjustmentRequest.Invalid {
            throw Self.invalidAdjustment(invalid)
        } catch let error as PostgresError where error.wasGivenUp {
            // Given up (the statement limit, the database gone): rolled back, nothing credited.
            throw APIError.unavailable("The adjustment was not made (the database was unavailable or a step passed its time limit); nothing was credited. Send it again.")
        }
        switch outcome {
        case .created(let adjustment):
            metrics.recordAdjustment(reason: adjustment.reason, impressions: adjustment.impressions, clicks: adjustment.clicks)
            return .json(.created, Self.encode(adjustment))
        case .repeated(let adjustment):
            return .json(.ok, Self.encode(adjustment))
        case .conflict:
            throw APIError(.adjustmentConflict, "adjustment_id \(request.adjustmentID) was made before with another request; choose a new adjustment_id.",
                           field: "adjustment_id")
        }
    }

    func read(_ adjustmentID: String) throws -> HTTPResponse {
        guard let adjustment = try reads.read({ try store.read(adjustmentID, on: $0) }) else {
            throw APIError.notFound("No adjustment \(adjustmentID).")
        }
        return .json(.ok, Self.encode(adjustment))
    }

    static func encode(_ adjustment: AdjustmentStore.Adjustment) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 512 + adjustment.ads.count * 128)
        writer.beginObject()
        writer.key("adjustment_id"); writer.string(adjustment.adjustmentID)
        writer.key("reason"); writer.string(adjustment.reason)
        writer.key("note"); writer.string(adjustment.note)
        writer.key("created_at"); writer.string(adjustment.createdAt.rfc3339)
        writer.key("from"); writer.string(adjustment.from.rfc3339)
        writer.key("to"); writer.string(adjustment.to.rfc3339)
        writer.key("credited_impressions"); writer.int(adjustment.impressions)
        writer.key("credited_clicks"); writer.int(adjustment.clicks)
        writer.key("ads")
        writer.beginArray()
        for ad in adjustment.ads {
            writer.beginObject()
            writer.key("ad_id"); writer.string(ad.adID)
            writer.key("advertiser_id"); writer.string(ad.advertiserID)
            writer.key("credited_impressions"); writer.int(ad.impressions)
            writer.key("credited_clicks"); writer.int(ad.clicks)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    /// The listing's parameters and errors (`from`, `to`, `advertiser_id`, `format`, `tz`); any
    /// other parameter, `granularity` included, is ignored.
    func creditsQuery(_ context: RequestContext) throws -> ReportQuery {
        do throws(ReportQuery.Invalid) {
            return try ReportQuery.forCredits(context.request.query, accept: context.request.headers["Accept"])
        } catch {
            throw ReportRoutes.invalidQuery(error)
        }
    }

    static let csvColumns = ["adjustment_id", "reason", "created_at", "ad_id", "advertiser_id", "events_from", "events_to",
                             "credited_impressions", "credited_clicks", "final"]

    func credits(_ query: ReportQuery, scope: ReportScope) throws -> HTTPResponse {
        let zones = KnownZones()
        let (rows, finalBefore): ([AdjustmentStore.CreditRow], Timestamp)
        do {
            (rows, finalBefore) = try reads.read { connection in
                try zones.load(on: connection)
                guard zones.contains(query.tz) == true else { throw ReportRoutes.invalidQuery(ReportQuery.unknownZone(query.tz.name)) }
                let finalBefore = try LifecycleState.finalBefore(on: connection) ?? LifecycleState.read(on: connection).finalBefore
                return (try store.credits(from: query.from, to: query.to, advertiserID: query.advertiserID, scope: scope, on: connection),
                        finalBefore)
            }
        } catch let error as ReportScope.Forbidden {
            throw ReportRoutes.forbidden(error)
        }
        let final = query.to.map { $0 <= finalBefore } ?? false
        if query.format == .csv {
            var bytes: [UInt8] = []
            ReportListingEncoder.appendCSVLine(Self.csvColumns, to: &bytes)
            for row in rows {
                ReportListingEncoder.appendCSVLine([row.adjustmentID, row.reason, row.createdAt.rfc3339, row.adID, row.advertiserID,
                                                    row.eventsFrom.rfc3339, row.eventsTo.rfc3339, String(row.impressions),
                                                    String(row.clicks), final ? "true" : "false"], to: &bytes)
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/csv; charset=utf-8")
            headers.add(name: "AdTally-Final-Before", value: finalBefore.rfc3339)
            return HTTPResponse(status: .ok, headers: headers, body: bytes)
        }
        var writer = JSONWriter(reservingCapacity: 256 + rows.count * 320)
        writer.beginObject()
        writer.key("from"); writer.string(query.from?.rfc3339)
        writer.key("to"); writer.string(query.to?.rfc3339)
        writer.key("tz"); writer.string(query.tz.name)
        writer.key("final_before"); writer.string(finalBefore.rfc3339)
        writer.key("rows")
        writer.beginArray()
        for row in rows {
            writer.beginObject()
            writer.key("adjustment_id"); writer.string(row.adjustmentID)
            writer.key("reason"); writer.string(row.reason)
            writer.key("created_at"); writer.string(row.createdAt.rfc3339)
            writer.key("ad_id"); writer.string(row.adID)
            writer.key("advertiser_id"); writer.string(row.advertiserID)
            writer.key("events_from"); writer.string(row.eventsFrom.rfc3339)
            writer.key("events_to"); writer.string(row.eventsTo.rfc3339)
            writer.key("credited_impressions"); writer.int(row.impressions)
            writer.key("credited_clicks"); writer.int(row.clicks)
            writer.key("final"); writer.bool(final)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return .json(.ok, writer.bytes)
    }
}

/// Where credits are counted for `/metrics` (`adtally_adjustments_total{reason}`,
/// `adtally_credited_events_total{type}`).
public protocol CreditMetrics: Sendable {
    func recordAdjustment(reason: String, impressions: Int64, clicks: Int64)
}
