import AdTally
import AdTallyApp
import Contract
import Foundation
import Postgres
import TestSupport
import Timestamps

/// A migrated database of its own, a fixed clock, and helpers to register feeds and send events
/// through the real stores.
struct StoreFixture {
    let database: TestDatabase
    let connection: PostgresConnection
    let clock: ManualClock
    let events: EventStore
    let feeds = FeedSnapshotStore()

    /// 2026-11-29T13:47:00Z
    static let start = Timestamp(microsecondsSinceEpoch: 1_795_960_020_000_000)

    /// The rules of API version 1 unless a test asks for the grace window, the tap rule, the
    /// impression a click needs or the session's click limit.
    init(clickWindowSeconds: Int = 30, clickGraceSeconds: Int = 0, tapWindowMilliseconds: Int = 0, clickNeedsImpression: Bool = false,
         sessionClickLimit: Int = 0) throws {
        database = try TestDatabase.create()
        connection = try database.connect()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        try MigrationRunner(migrations: try Migration.load(from: root.appendingPathComponent("migrations"))).apply(on: connection)
        // The tests store events received at instants of their choosing, in the past: the rollups
        // start before all of them (a fresh database's start at the hour it was made), so that
        // reports read them raw until a test folds them.
        try connection.execute("SELECT adtally_restart_rollups('2026-01-01T00:00:00Z')")
        clock = ManualClock(Self.start)
        // The store's form the service picks for the node (`AdTallyService`): one
        // adtally_store_events call a session on Citus (scripts/check-citus), array inserts on PostgreSQL.
        events = EventStore(clickRule: ClickRule(windowSeconds: clickWindowSeconds, graceSeconds: clickGraceSeconds,
                                                 tapWindowMilliseconds: tapWindowMilliseconds, needsImpression: clickNeedsImpression,
                                                 sessionClickLimit: sessionClickLimit),
                            topology: try CitusDistributionTests.isCitus(connection) ? .citus : .plain)
    }

    static func ad(_ id: String, _ position: Int32, advertiser: String = "acme", url: String? = nil) -> AdInput {
        AdInput(adID: id, position: position, advertiserID: advertiser, url: url ?? "https://\(advertiser).example/\(id)")
    }

    @discardableResult
    func feed(_ session: String, _ snapshot: String, _ ads: [AdInput]) throws -> FeedSnapshotStore.RegistrationResult {
        try feeds.register(FeedSnapshotInput(snapshotID: snapshot, ads: ads), sessionID: session, now: clock.now(), on: connection)
    }

    static func event(_ type: EventType, _ session: String, _ ad: String, id: String = UUID().uuidString.lowercased(),
                      snapshot: String? = nil, position: Int32? = nil, visibility: Visibility? = nil, occurredAt: Timestamp = start) -> EventInput {
        EventInput(eventID: id, type: type, sessionID: session, adID: ad, occurredAt: occurredAt, snapshotID: snapshot,
                   position: position, visibility: visibility)
    }

    func send(_ batch: [EventInput]) throws -> [EventOutcome] {
        try events.ingest(batch, receivedAt: .fixed(clock.now()), on: connection)
    }

    func send(_ event: EventInput) throws -> EventOutcome {
        try send([event])[0]
    }

    func count(_ sql: String, _ parameters: [any PostgresBindable] = []) throws -> Int {
        try connection.query(sql, parameters).first?.decode(Int.self, at: 0) ?? -1
    }
}

extension StatementLimit {
    /// The limit a process has with the configuration's default
    /// (`ADTALLY_MAINTENANCE_STATEMENT_TIMEOUT_SECONDS`), for stores made in tests.
    static let configured = StatementLimit(Configuration().maintenanceStatementTimeout)
}
