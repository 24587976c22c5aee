import HTTP
import HTTPServer
import JSON
import Postgres
import Runtime

/// `PUT` and `GET /v1/sessions/{session_id}/feed` (API.md section 1). A registration writes to
/// the primary (`pool`); the current feed is read where reports are (`reads`: a hot standby when
/// `ADTALLY_REPORTS_DATABASE_URL` is set, so a snapshot registered a moment ago may not be there yet).
public struct FeedRoutes: Sendable {
    let pool: PostgresPool
    let reads: ReadDatabase
    let store = FeedSnapshotStore()
    let clock: any WallClock

    public init(pool: PostgresPool, reads: ReadDatabase, clock: any WallClock) {
        self.pool = pool
        self.reads = reads
        self.clock = clock
    }

    static let pattern = "/v1/sessions/{session_id}/feed"

    public func register(on edge: inout Edge) {
        edge.add(.put, Self.pattern, .token(.feed, jsonBody: true)) { request in
            let sessionID = try Self.sessionID(request)
            return .onWorker { context in try put(sessionID, context) }
        }
        edge.add(.get, Self.pattern, .token([.feed, .reports])) { request in
            let sessionID = try Self.sessionID(request)
            return .onWorker { _ in try get(sessionID) }
        }
    }

    /// The path's session id (the edge checked its form).
    static func sessionID(_ request: EdgeRequest) throws -> String {
        guard let sessionID = request.path["session_id"] else { throw APIError.invalidPath("session_id") }
        return sessionID
    }

    func put(_ sessionID: String, _ context: RequestContext) throws -> HTTPResponse {
        let snapshot: FeedSnapshotInput
        do {
            snapshot = try FeedSnapshotInput(body: context.request.body)
        } catch {
            switch error {
            case .malformedJSON(let message): throw APIError(.malformedJSON, message)
            case .invalid(let field, let message): throw APIError(.invalidSnapshot, message, field: field)
            }
        }
        let result = try pool.withConnection { try store.register(snapshot, sessionID: sessionID, now: clock.now(), on: $0) }
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
            throw APIError(.snapshotConflict, "snapshot_id \(snapshot.snapshotID) is already registered with other content or for another session.",
                           field: "snapshot_id")
        case .superseded:
            throw APIError(.snapshotSuperseded, "snapshot_id \(snapshot.snapshotID) was registered before, but a newer snapshot is current; the current feed is unchanged.",
                           field: "snapshot_id")
        case .sessionErased:
            throw APIError.sessionErased(sessionID)
        case .adAdvertiserConflict(let adID, let known):
            let index = snapshot.ads.firstIndex { $0.adID == adID } ?? 0
            throw APIError(.adAdvertiserConflict, "ad \(adID) belongs to advertiser \(known); an ad cannot change advertiser.",
                           field: "ads[\(index)].advertiser_id")
        }
    }

    func get(_ sessionID: String) throws -> HTTPResponse {
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
