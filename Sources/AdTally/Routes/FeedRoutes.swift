import HTTP
import HTTPServer
import Postgres

/// `PUT` and `GET /v1/sessions/{session_id}/feed` (API.md section 1). A registration writes to
/// the primary (`pool`); the current feed is read where reports are (`reads`: a hot standby when
/// `ADTALLY_REPORTS_DATABASE_URL` is set, so a snapshot registered a moment ago may not be there yet).
struct FeedRoutes: Sendable {
    let checks: RequestChecks
    let pool: PostgresPool
    let reads: ReadDatabase
    let store: FeedSnapshotStore
    let clock: any WallClock

    static let pattern = "/v1/sessions/{session_id}/feed"

    func register(on router: inout Router) {
        router.put(Self.pattern, headCheck: { context in
            try checks.requireScope(.feed, context)
            _ = try checks.requireIdentifier(context, "session_id")
            try checks.requireJSON(context.request)
        }, put)
        router.get(Self.pattern, headCheck: { context in
            try checks.requireScope([.feed, .reports], context)
            _ = try checks.requireIdentifier(context, "session_id")
        }, get)
    }

    @Sendable func put(_ context: RequestContext) throws -> HTTPResponse {
        let sessionID = try checks.requireIdentifier(context, "session_id")
        let snapshot: FeedSnapshotInput
        do {
            snapshot = try FeedSnapshotInput.decode(body: context.request.body)
        } catch {
            throw APIError.input(error)
        }
        let result = try DatabaseUnavailable.mapping {
            try pool.withConnection { try store.register(snapshot, sessionID: sessionID, now: clock.now(), on: $0) }
        }
        switch result {
        case .created, .alreadyCurrent:
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("session_id"); writer.string(sessionID)
            writer.key("snapshot_id"); writer.string(snapshot.snapshotID)
            writer.key("ads"); writer.int(snapshot.ads.count)
            writer.key("current"); writer.bool(true)
            writer.endObject()
            return .json(result == .created ? .created : .ok, writer.bytes)
        case .snapshotConflict:
            throw APIError.conflict("snapshot_conflict",
                                    "snapshot_id \(snapshot.snapshotID) is already registered with other content or for another session.",
                                    field: "snapshot_id")
        case .superseded:
            throw APIError.conflict("snapshot_superseded",
                                    "snapshot_id \(snapshot.snapshotID) was registered before, but a newer snapshot is current; the current feed is unchanged.",
                                    field: "snapshot_id")
        case .sessionErased:
            throw APIError.sessionErased(sessionID)
        case .adAdvertiserConflict(let adID, let known):
            let index = snapshot.ads.firstIndex { $0.adID == adID } ?? 0
            throw APIError.conflict("ad_advertiser_conflict",
                                    "ad \(adID) belongs to advertiser \(known); an ad cannot change advertiser.",
                                    field: "ads[\(index)].advertiser_id")
        }
    }

    @Sendable func get(_ context: RequestContext) throws -> HTTPResponse {
        let sessionID = try checks.requireIdentifier(context, "session_id")
        let (current, erased) = try reads.read { connection in
            let feed = try store.current(sessionID: sessionID, on: connection)
            return (feed, feed == nil ? try SessionSuppression.isErased(sessionID, on: connection) : false)
        }
        if erased { throw APIError.sessionErased(sessionID) }
        guard let feed = current else {
            throw APIError.notFound("Session \(sessionID) has no registered feed.")
        }
        var writer = JSONWriter(reservingCapacity: 256 + feed.ads.count * 160)
        writer.beginObject()
        writer.key("session_id"); writer.string(feed.sessionID)
        writer.key("snapshot_id"); writer.string(feed.snapshotID)
        writer.key("registered_at"); writer.timestamp(feed.registeredAt)
        writer.key("ads")
        writer.beginArray()
        for ad in feed.ads {
            writer.beginObject()
            writer.key("ad_id"); writer.string(ad.adID)
            writer.key("position"); writer.int(ad.position)
            writer.key("advertiser_id"); writer.string(ad.advertiserID)
            writer.key("url"); writer.string(ad.url)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return .json(.ok, writer.bytes)
    }
}
