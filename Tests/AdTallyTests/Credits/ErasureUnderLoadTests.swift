@testable import AdTally
import AdTallyApp
import Contract
import Foundation
import Postgres
import Synchronization
import Testing
import Timestamps

/// Sessions erased while events of other sessions flow: every report over the erased sessions'
/// history (random ranges to the microsecond, three time zones, single ad and listings) is the same
/// before, after, and after the history is folded into rollups; nothing of the flowing sessions is
/// lost.
@Suite(.timeLimit(.minutes(5))) struct ErasureUnderLoadTests {
    typealias F = StoreFixture
    static let ads = ["ad-0", "ad-1", "ad-2", "ad-3"]

    /// Every report `queries` asks for, without `final_before` (the clock moves).
    static func answers(_ r: ReportFixture, _ queries: [String]) async -> [String] {
        var bodies: [String] = []
        for query in queries {
            let response = await r.get(query)
            #expect(response.status == 200, "\(query): \(response.text)")
            bodies.append(response.text.replacingOccurrences(of: #""final_before":"[^"]*""#, with: "", options: .regularExpression))
        }
        return bodies
    }

    @Test func reportsAreTheSameBeforeAndAfterErasuresUnderLoad() async throws {
        let r = try ReportFixture()
        let f = r.store
        var random = SystemRandomNumberGenerator()
        let erased = (0..<8).map { "gone-\($0)" }, kept = (0..<4).map { "kept-\($0)" }
        for session in erased + kept {
            try f.feed(session, "feed-\(session)", Self.ads.enumerated().map { F.ad($0.element, Int32($0.offset), advertiser: $0.offset % 2 == 0 ? "acme" : "globex") })
        }
        // Three hours of history at fixed instants, every session: first impressions, repeats,
        // glances, clicks (some too soon), clicks on ads never served.
        let start = f.clock.now()
        for _ in 0..<60 {
            var batch: [EventInput] = []
            for session in erased + kept {
                let ad = Self.ads[Int.random(in: 0..<Self.ads.count, using: &random)]
                batch.append(F.event(.impression, session, ad, visibility: Bool.random(using: &random) ? nil : Visibility(fraction: 0.2, milliseconds: 100)))
                batch.append(F.event(.click, session, Bool.random(using: &random) ? ad : "ad-unserved"))
            }
            _ = try f.send(batch)
            f.clock.advance(seconds: Double.random(in: 60...240, using: &random))
        }
        let end = f.clock.now()
        let span = end.microsecondsSinceEpoch - start.microsecondsSinceEpoch
        var queries: [String] = []
        for _ in 0..<12 {
            let a = start.microsecondsSinceEpoch + Int64.random(in: -60_000_000...span, using: &random)
            let b = a + Int64.random(in: 1...span, using: &random)
            let from = Timestamp(microsecondsSinceEpoch: a).rfc3339Microseconds, to = Timestamp(microsecondsSinceEpoch: b).rfc3339Microseconds
            for ad in Self.ads + ["ad-unserved"] {
                queries.append("/v1/reports/ads/\(ad)?from=\(from)&to=\(to)")
            }
            for tz in ["UTC", "Asia/Kolkata", "America/New_York"] {
                queries.append("/v1/reports/ads?from=\(from)&to=\(to)&granularity=hour&tz=\(tz)")
            }
        }
        let whole = "from=\(start.adding(microseconds: -3_600_000_000).rfc3339)&to=\(end.adding(microseconds: 3_600_000_000).rfc3339)"
        queries += ["/v1/reports/ads?\(whole)", "/v1/reports/ads?\(whole)&granularity=day&tz=Asia/Kolkata", "/v1/reports/ads?\(whole)&format=csv"]
        let before = await Self.answers(r, queries)

        // Events of the kept sessions flow (stamped by the database's clock, now) while the others
        // are erased, each on a connection of its own.
        let stop = Atomic<Bool>(false)
        let acknowledged = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        let database = f.database, store = f.events
        let flow = Thread {
            do {
                let connection = try database.connect()
                while !stop.load(ordering: .relaxed) {
                    let batch = kept.map { F.event(.impression, $0, "ad-\(Int.random(in: 0..<4))") }
                    let outcomes = try store.ingest(batch, receivedAt: .databaseClock, on: connection)
                    if outcomes.contains(where: { $0.reason == .sessionErased }) { failures.withLock { $0.append("a kept session refused") } }
                    acknowledged.add(batch.count, ordering: .relaxed)
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        flow.start()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for session in erased {
                group.addTask {
                    let erasure = try ErasureStore(limit: .configured).erase(session, on: try database.connect())
                    #expect(erasure.events == 120)
                }
            }
            try await group.waitForAll()
        }
        stop.store(true, ordering: .relaxed)
        while !flow.isFinished { try await Task.sleep(for: .milliseconds(5)) }
        #expect(failures.withLock { $0 } == [])
        #expect(acknowledged.load(ordering: .relaxed) > 0)

        let after = await Self.answers(r, queries)
        for (index, query) in queries.enumerated() where before[index] != after[index] {
            Issue.record("\(query) changed:\n\(before[index])\n\(after[index])")
        }
        for session in erased {
            #expect(try ErasureTests.rowsNaming(session, f) == [:])
        }
        // Every acknowledged event of the flowing sessions is stored.
        #expect(try f.count("SELECT count(*) FROM events WHERE received_at > $1", [end]) == acknowledged.load(ordering: .relaxed))

        // Folded into rollups, the anonymous rows count the same.
        try LifecycleTests.foldAll(f.connection)
        let folded = await Self.answers(r, queries)
        for (index, query) in queries.enumerated() where before[index] != folded[index] {
            Issue.record("\(query) changed after the fold:\n\(before[index])\n\(folded[index])")
        }
    }
}


/// A session erased while its own events keep coming: each event is either stored before the
/// erasure (and then kept as an anonymous row) or refused as `session_erased`; afterwards no row
/// names the session, and every later event is refused.
@Suite(.timeLimit(.minutes(3))) struct ErasureRaceTests {
    typealias F = StoreFixture

    @Test func eventsOfTheErasedSessionRacingItsErasureLeaveNoRowNamingIt() async throws {
        for round in 0..<5 {
            let f = try F()
            let session = "racing-\(round)"
            try f.feed(session, "feed-\(round)", [F.ad("ad-1", 0), F.ad("ad-2", 1)])
            let database = f.database, store = f.events
            let stop = Atomic<Bool>(false)
            let answered = Mutex<[EventOutcome]>([])
            let failures = Mutex<[String]>([])
            let flow = Thread {
                do {
                    let connection = try database.connect()
                    while !stop.load(ordering: .relaxed) {
                        // Mostly impressions already counted: they take no lock the erasure waits for.
                        let batch = Bool.random() ? [F.event(.impression, session, "ad-\(Int.random(in: 1...2))")]
                            : [F.event(.impression, session, "ad-1"), F.event(.click, session, "ad-1")]
                        let outcomes = try store.ingest(batch, receivedAt: .databaseClock, on: connection)
                        answered.withLock { $0 += outcomes }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            flow.start()
            try await Task.sleep(for: .milliseconds(Int.random(in: 5...40)))
            let erasure = try ErasureStore(limit: .configured).erase(session, on: try database.connect())
            // A few more batches after the erasure answered.
            try await Task.sleep(for: .milliseconds(20))
            stop.store(true, ordering: .relaxed)
            while !flow.isFinished { try await Task.sleep(for: .milliseconds(5)) }
            #expect(failures.withLock { $0 } == [])
            #expect(try ErasureTests.rowsNaming(session, f) == [:], "round \(round)")
            let outcomes = answered.withLock { $0 }
            let refused = outcomes.filter { $0.reason == .sessionErased }.count
            #expect(refused > 0, "round \(round): no event came after the erasure")
            // Every event not refused was stored before the erasure and is kept, anonymous.
            #expect(Int64(outcomes.count - refused) == erasure.events, "round \(round)")
            #expect(try f.count("SELECT count(*) FROM events WHERE session_id LIKE '#%'") == outcomes.count - refused)
        }
    }
}
