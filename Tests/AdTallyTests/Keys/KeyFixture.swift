@testable import AdTally
import AdTallyApp
import Foundation
import HTTP
import HTTPServer
import JSON
import Postgres
import Runtime
import Synchronization
import TestSupport
import Testing
import Timestamps

/// A migrated database of its own (through `StoreFixture`) and every route an advertiser key may
/// reach or be refused by, on one edge with a keyring, as `AdTallyService` registers them: the
/// reports, the events export, credits, erasure, feeds and the keys themselves. Requests go
/// through the real parser, router, edge and handler in process; a streamed body is collected.
struct KeyFixture {
    let store: StoreFixture
    let pool: PostgresPool
    let keyring: AdvertiserKeyring
    let authCounts = AuthCounts()
    let router: Router
    /// The log lines the routes wrote (key creations and revocations) and the edge's refusals
    /// (through `outbox`: `flush` it first).
    let lines = LogLines()
    let outbox: LogOutbox
    static let admin = "keys-admin-token-0001"
    static let reports = "keys-reports-token-01"

    init() throws {
        store = try StoreFixture()
        pool = PostgresPool(configuration: .init(connectionString: store.database.connectionString, size: 3,
                                                 acquireTimeout: .seconds(2), connectTimeoutSeconds: 2))
        keyring = AdvertiserKeyring(clock: store.clock)
        let logger = Logger(level: .info) { [lines] line in lines.append(line) }
        outbox = LogOutbox(logger: logger)
        var edge = Edge(tokens: AccessTokens(admin: [Self.admin], feed: [], reports: [Self.reports]), keyring: keyring, limits: nil,
                        authCounts: authCounts, log: outbox)
        let unbounded: @Sendable () -> Timestamp = { Timestamp(microsecondsSinceEpoch: .min) }
        let database = ReadDatabase(pool: pool, isStandby: false, answerTimeout: .seconds(120), logger: .discarding)
        let maxDuration = Configuration().reportMaxDuration
        ReportRoutes(database: database, horizon: unbounded, maxDuration: maxDuration, registerZone: { _ in }).register(on: &edge)
        EventExportRoutes(database: database, horizon: unbounded, maxDuration: maxDuration).register(on: &edge)
        CreditRoutes(pool: pool, reads: database, limit: .configured, horizon: unbounded, metrics: Metrics()).register(on: &edge)
        ErasureRoutes(pool: pool, limit: .configured, metrics: Metrics()).register(on: &edge)
        FeedRoutes(pool: pool, reads: database, clock: store.clock).register(on: &edge)
        KeyRoutes(pool: pool, keyring: keyring, logger: logger).register(on: &edge)
        router = edge.router
    }

    var connection: PostgresConnection { store.connection }

    /// `method target` with `Authorization: Bearer <credential>` (none when nil) and a JSON body.
    func request(_ method: String, _ target: String, credential: String?, body: String? = nil) async -> ReportFixture.Response {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: test\r\n"
        if let credential { head += "Authorization: Bearer \(credential)\r\n" }
        let bytes = Array((body ?? "").utf8)
        if body != nil { head += "Content-Type: application/json\r\nContent-Length: \(bytes.count)\r\n" }
        head += "\r\n"
        return await ReportFixture.send(Array(head.utf8) + bytes, to: router)
    }

    func get(_ target: String, _ credential: String?) async -> ReportFixture.Response {
        await request("GET", target, credential: credential)
    }

    /// A key made for `advertiser` through the API (admin token): its id and secret.
    func makeKey(_ advertiser: String, name: String = "billing", scopes: [String]? = nil) async throws -> (id: String, secret: String) {
        var members = #""name": \#(Self.quoted(name))"#
        if let scopes { members += #", "scopes": [\#(scopes.map(Self.quoted).joined(separator: ", "))]"# }
        let answer = await request("POST", "/v1/advertisers/\(advertiser)/keys", credential: Self.admin, body: "{\(members)}")
        guard answer.status == 201, let id = answer.json["key_id"]?.stringValue, let secret = answer.json["key"]?.stringValue else {
            throw TestDatabaseError("key not made for \(advertiser): \(answer.status) \(answer.text)")
        }
        return (id, secret)
    }

    static func quoted(_ text: String) -> String {
        String(decoding: JSONWriter.serialize(.string(text)), as: UTF8.self)
    }
}

/// Lines a test's logger wrote.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
