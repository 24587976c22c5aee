import AdTally
import Dispatch
import Foundation
import Postgres
import Synchronization
import Testing

/// Rule 6: the rules hold when requests race, across processes. Two pools and two group-commit
/// ingestors stand for two AdTally processes on one database; each racer sends its own event id.
@Suite struct ConcurrencyTests {
    typealias F = StoreFixture

    static func race(_ type: EventType, racers: Int = 50) throws -> (outcomes: [EventOutcome], fixture: F) {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let logger = Logger(level: .error) { _ in }
        let processes = (0..<2).map { _ in
            let pool = PostgresPool(configuration: .init(connectionString: f.database.connectionString, size: 4, acquireTimeout: .seconds(30)))
            return (pool, EventIngestor(pool: pool, store: EventStore(clickWindowSeconds: 30), clock: f.clock, logger: logger,
                                        committers: 3, queueWait: .seconds(30)))
        }
        defer {
            for (pool, ingestor) in processes {
                ingestor.shutdown()
                pool.shutdown()
            }
        }
        let outcomes = Mutex<[EventOutcome]>([])
        let errors = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: racers) { racer in
            let (_, ingestor) = processes[racer % 2]
            do {
                let result = try ingestor.ingest([F.event(type, "s1", "ad-1")])
                outcomes.withLock { $0.append(contentsOf: result) }
            } catch {
                errors.withLock { $0.append("\(error)") }
            }
        }
        #expect(errors.withLock { $0 }.isEmpty)
        return (outcomes.withLock { $0 }, f)
    }

    @Test func fiftyRacingImpressionsCountOnce() throws {
        let (outcomes, f) = try Self.race(.impression)
        #expect(outcomes.count == 50)
        #expect(outcomes.filter { $0 == .accepted }.count == 1)
        #expect(outcomes.filter { $0 == .duplicate(.impressionAlreadyCounted) }.count == 49)
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 1)
        #expect(try f.count("SELECT count(*) FROM events") == 50)
    }

    @Test func fiftyRacingClicksCountOnce() throws {
        let (outcomes, f) = try Self.race(.click)
        #expect(outcomes.count == 50)
        #expect(outcomes.filter { $0 == .accepted }.count == 1)
        #expect(outcomes.filter { $0 == .duplicate(.clickWithinWindow) }.count == 49)
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 1)
    }

    @Test func racingReplaysOfOneEventStoreItOnce() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let event = F.event(.impression, "s1", "ad-1")
        let outcomes = Mutex<[EventOutcome]>([])
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            do {
                let connection = try f.database.connect()
                let result = try connection.transaction { try f.events.ingest([event], receivedAt: f.clock.now(), on: $0) }
                outcomes.withLock { $0.append(contentsOf: result) }
            } catch {
                Issue.record("racer failed: \(error)")
            }
        }
        #expect(outcomes.withLock { $0 } == Array(repeating: .accepted, count: 20))
        #expect(try f.count("SELECT count(*) FROM events") == 1)
    }
}
