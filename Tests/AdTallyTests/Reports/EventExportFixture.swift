@testable import AdTally
import AdTallyApp
import Foundation
import HTTP
import HTTPServer
import JSON
import Postgres
import Runtime
import TestSupport
import Testing
import Timestamps

/// A migrated database of its own (through `StoreFixture`), the report routes and the event export
/// on one router, as `AdTallyService` registers them, and a way to send them raw HTTP requests in
/// process (`ReportFixture.get`'s way: the real parser, router, head check and handler, a streamed
/// body collected chunk by chunk).
struct EventExportFixture {
    let store: StoreFixture
    let pool: PostgresPool
    let router: Router
    static let token = "export-test-token"
    /// A token with the `feed` scope alone: the export needs `reports`.
    static let feedToken = "export-feed-only-token"

    init(fetchSize: Int = 1_000, connectionString: String? = nil, horizon: Timestamp? = nil) throws {
        store = try StoreFixture()
        pool = PostgresPool(configuration: .init(connectionString: connectionString ?? store.database.connectionString, size: 2,
                                                 acquireTimeout: .seconds(2), connectTimeoutSeconds: 2))
        var edge = Edge(tokens: AccessTokens(admin: [Self.token], feed: [Self.feedToken], reports: []), limits: nil)
        let bound = horizon ?? Timestamp(microsecondsSinceEpoch: .min)
        let database = ReadDatabase(pool: pool, isStandby: false, answerTimeout: .seconds(120), logger: .discarding)
        ReportRoutes(database: database, horizon: { bound }, maxDuration: Configuration().reportMaxDuration, registerZone: { _ in })
            .register(on: &edge)
        var export = EventExportRoutes(database: database, horizon: { bound }, maxDuration: Configuration().reportMaxDuration)
        export.store = EventExportStore(fetchSize: fetchSize)
        export.register(on: &edge)
        self.router = edge.router
    }

    var connection: PostgresConnection { store.connection }

    /// `GET target` with `token` (none: no `Authorization`), through the router as the server calls it.
    func get(_ target: String, headers: [(String, String)] = [], token: String? = Self.token) async -> ReportFixture.Response {
        var head = "GET \(target) HTTP/1.1\r\nHost: test\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return await ReportFixture.send(Array(head.utf8), to: router)
    }

    /// The lines of an NDJSON body, each parsed; a line that is not a JSON object is recorded.
    static func lines(_ response: ReportFixture.Response, sourceLocation: SourceLocation = #_sourceLocation) -> [JSONValue] {
        guard !response.body.isEmpty else { return [] }
        #expect(response.body.last == UInt8(ascii: "\n"), "an NDJSON body ends with a newline", sourceLocation: sourceLocation)
        return response.body.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast().map { line in
            guard let value = try? JSONParser.parse(Array(line)), value.objectValue != nil else {
                Issue.record("not a JSON object: \(String(decoding: line, as: UTF8.self))", sourceLocation: sourceLocation)
                return .null
            }
            return value
        }
    }

    /// An event row written directly, with every column under the test's control; its event id.
    @discardableResult
    func insert(_ ad: String, _ type: String, _ status: String, _ reason: String? = nil, at receivedAt: String, session: String = "s-direct",
                eventID: String? = nil, occurredAt: String? = nil, snapshot: String? = nil, position: Int? = nil) throws -> String {
        guard let time = Timestamp(rfc3339: receivedAt), let occurred = Timestamp(rfc3339: occurredAt ?? receivedAt) else {
            throw TestDatabaseError("bad time \(receivedAt)")
        }
        let id = eventID ?? UUID().uuidString.lowercased()
        try connection.query("""
            INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at, snapshot_id, position)
            VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8, $9, $10)
            """, [session, id, type, ad, status, reason, occurred, time, snapshot, position])
        return id
    }

    /// A credit mark for one stored event, as an adjustment leaves it (`credit_marks`, migration 0014).
    func mark(session: String, eventID: String, adjustment: String) throws {
        try connection.query("""
            INSERT INTO credit_marks (session_id, event_id, adjustment_id, ad_id, type, received_at)
            SELECT e.session_id, e.event_id, $3, e.ad_id, e.type, e.received_at FROM events e
            WHERE e.session_id = $1 AND e.event_id = $2::uuid
            """, [session, eventID, adjustment])
    }

    /// Erases a session with the migration's function, as `DELETE /v1/sessions/{id}` does; its
    /// raw events become anonymous rows.
    @discardableResult
    func erase(_ session: String) throws -> Int {
        try connection.query("SELECT events FROM adtally_erase_session($1)", [session]).first?.decode(Int.self, at: 0) ?? -1
    }
}
