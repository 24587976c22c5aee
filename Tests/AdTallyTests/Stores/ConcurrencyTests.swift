@testable import AdTally
import Contract
import Dispatch
import Foundation
import Postgres
import Runtime
import Synchronization
import Testing

/// Rule 6: the rules hold when requests race, across processes. Two pools and two group-commit
/// ingestors stand for two AdTally processes on one database; each racer sends its own event id.
@Suite(.timeLimit(.minutes(5))) struct ConcurrencyTests {
    /// API 1.2's default click rules: the grace window and the tap rule, without 1.3's impression a
    /// click needs and the session's limit (these tests click without impressions).
    static let rulesOf1_2 = ClickRule.configured(needsImpression: false, sessionClickLimit: 0)
    typealias F = StoreFixture

    /// A pool and a group-commit ingestor on the fixture's database: what one AdTally process has.
    struct Process {
        let pool: PostgresPool
        let ingestor: EventIngestor

        /// Version 1's click rules unless a test asks for others.
        static let version1 = ClickRule.version1()

        init(_ f: F, poolSize: Int = 4, committers: Int = 3, queueWait: Duration = .seconds(30), clickRule: ClickRule = version1) {
            pool = PostgresPool(configuration: .init(connectionString: f.database.connectionString, size: poolSize, acquireTimeout: .seconds(30)))
            ingestor = EventIngestor(pool: pool, store: EventStore(clickRule: clickRule), clock: f.clock, logger: Logger(level: .error) { _ in },
                                     committers: committers, queueWait: queueWait)
            ingestor.start()
        }

        func shutdown() {
            ingestor.shutdown(by: .now + .seconds(10))
            pool.shutdown()
        }
    }

    static func race(_ type: EventType, racers: Int = 50) throws -> (outcomes: [EventOutcome], fixture: F) {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let processes = [Process(f), Process(f)]
        defer { processes.forEach { $0.shutdown() } }
        let outcomes = Mutex<[EventOutcome]>([])
        let errors = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: racers) { racer in
            let ingestor = processes[racer % 2].ingestor
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

    /// Polls `condition` every 5 ms for up to `seconds`; whether it became true.
    static func eventually(within seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(5_000)
        }
        return try condition()
    }

    /// How many sessions of the test's database wait on a lock.
    static func lockWaiters(_ watcher: PostgresConnection) throws -> Int? {
        try watcher.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
            .first?.decode(Int.self, at: 0)
    }

    /// A connection in an open transaction that holds the lock of the pair's `session_ads` row.
    static func holdRow(_ f: F, _ session: String, _ ad: String) throws -> PostgresConnection {
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        try holder.query("UPDATE session_ads SET first_served_at = first_served_at WHERE session_id = $1 AND ad_id = $2", [session, ad])
        return holder
    }

    /// Runs `body` on another thread, waits (polling, up to 30 s) until PostgreSQL shows it waiting
    /// on a lock, then runs `release` (which lets it go on) and returns what `body` returned. The
    /// order is forced rather than hoped for.
    static func runBehindLock<T: Sendable>(_ f: F, _ body: @escaping @Sendable () throws -> T, release: () throws -> Void) throws -> T {
        let watcher = try f.database.connect()
        let result = Mutex<Result<T, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        // A thread of its own, not a shared queue: it must start now, whatever other tests block.
        Thread {
            let outcome = Result { try body() }
            result.withLock { $0 = outcome }
            finished.signal()
        }.start()
        var waiting = false
        _ = try eventually {
            waiting = try lockWaiters(watcher) == 1
            return waiting || result.withLock { $0 != nil }
        }
        #expect(waiting, "it never waited on the held row")
        try release()
        #expect(finished.wait(timeout: .now() + 30) == .success, "it did not finish once released")
        guard let outcome = result.withLock({ $0 }) else { throw PostgresError(kind: .statementFailed, message: "no result") }
        return try outcome.get()
    }

    /// Sends `event` through the fixture while `holder` has an open transaction that changed its
    /// pair's row, and returns its outcome once `holder` ends that transaction with `end`.
    static func sendBehindLock(_ f: F, _ event: EventInput, holder: PostgresConnection, end: String) throws -> EventOutcome {
        let fixture = f
        return try runBehindLock(f, { try fixture.send(event) }, release: { try holder.execute(end) })
    }

    @Test func claimWaitingOnACommittedClaimIsADuplicate() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        #expect(try f.events.ingest([F.event(.impression, "s1", "ad-1"), F.event(.click, "s1", "ad-1")], receivedAt: .fixed(f.clock.now()), inOpenTransactionOn: holder)
                == [.accepted, .accepted])
        #expect(try Self.sendBehindLock(f, F.event(.impression, "s1", "ad-1"), holder: holder, end: "COMMIT") == .duplicate(.impressionAlreadyCounted))
        #expect(try f.send(F.event(.click, "s1", "ad-1")) == .duplicate(.clickWithinWindow))
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 2)
    }

    @Test func claimWaitingOnARolledBackClaimWins() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        #expect(try f.events.ingest([F.event(.click, "s1", "ad-1")], receivedAt: .fixed(f.clock.now()), inOpenTransactionOn: holder) == [.accepted])
        #expect(try Self.sendBehindLock(f, F.event(.click, "s1", "ad-1"), holder: holder, end: "ROLLBACK") == .accepted)
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 1)
        #expect(try f.count("SELECT count(*) FROM session_ads WHERE last_click_at IS NOT NULL") == 1)
    }

    @Test func clickWaitingOnARefreshIsJudgedByTheNewFeed() throws {
        // The refresh is written as registration writes it (the session's row locked first, then
        // the ad moved to row 11), kept open so that the click, which names the old row, must wait.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 3)])
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        try holder.query("SELECT 1 FROM sessions WHERE session_id = 's1' FOR UPDATE")
        try holder.query("UPDATE session_ads SET current_position = 11 WHERE session_id = 's1' AND ad_id = 'ad-1'")
        #expect(try Self.sendBehindLock(f, F.event(.click, "s1", "ad-1", position: 3), holder: holder, end: "COMMIT") == .rejected(.positionMismatch))
        #expect(try f.send(F.event(.click, "s1", "ad-1", position: 11)) == .accepted)
    }

    @Test func clicksAreDecidedUnderTheirSessionsRowLockAndRejectionsClaimNoPair() throws {
        // A batch whose clicks are all rejected holds its session's row until it ends (the click
        // rule's state cannot change under it), but no pair's row: nothing was claimed.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-a", 3), F.ad("ad-b", 4)])
        let ingesting = try f.database.connect()
        try ingesting.execute("BEGIN")
        #expect(try f.events.ingest([F.event(.click, "s1", "ad-a", position: 7), F.event(.click, "s1", "ad-a", position: 8)],
                                    receivedAt: .fixed(f.clock.now()), inOpenTransactionOn: ingesting)
                == [.rejected(.positionMismatch), .rejected(.positionMismatch)])
        let locked = #expect(throws: PostgresError.self) {
            try f.connection.query("SELECT 1 FROM sessions WHERE session_id = 's1' FOR UPDATE NOWAIT")
        }
        #expect(locked?.sqlState == SQLState.lockNotAvailable)
        #expect(try f.count("SELECT count(*) FROM (SELECT 1 FROM session_ads WHERE session_id = 's1' FOR UPDATE NOWAIT) AS b") == 2)
        try ingesting.execute("ROLLBACK")
    }

    @Test func registrationThatDeadlocksRunsAgain() throws {
        // Another transaction holds ad-b's row, the registration locks ad-a and waits for ad-b,
        // then the other transaction asks for ad-a: a deadlock, which PostgreSQL breaks by failing
        // the registration (the holder's deadlock_timeout is set past the registration's 1 s).
        // The registration must run again and succeed, not fail the request.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-a", 0), F.ad("ad-b", 1)])
        let holder = try f.database.connect()
        try holder.execute("BEGIN")
        try holder.execute("SET LOCAL deadlock_timeout = '60s'")
        try holder.query("UPDATE session_ads SET current_position = current_position WHERE session_id = 's1' AND ad_id = 'ad-b'")
        let fixture = f
        let registered = try Self.runBehindLock(f, { try fixture.feed("s1", "feed-2", [F.ad("ad-a", 5), F.ad("ad-b", 6)]) }, release: {
            // Blocks until PostgreSQL fails the registration's transaction, which frees ad-a.
            try holder.query("UPDATE session_ads SET current_position = current_position WHERE session_id = 's1' AND ad_id = 'ad-a'")
            try holder.execute("COMMIT")
        })
        #expect(registered == .created)
        #expect(try f.count("SELECT count(*) FROM session_ads WHERE current_snapshot_id = 'feed-2'") == 2)
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

    @Test func refreshesRacingEventsOfTheirSessionNeitherFailNorMiscount() throws {
        // Registrations and event batches lock the session's session_ads rows in one order (ad id
        // bytes), so they take turns instead of deadlocking; every snapshot holds all ten ads, so
        // each ad has exactly one accepted impression and one accepted click whatever the order.
        let f = try F()
        let ads = (0..<10).map { "ad-\($0)" }
        try f.feed("s1", "feed-0", ads.enumerated().map { F.ad($1, Int32($0)) })
        let process = Process(f, poolSize: 8)
        defer { process.shutdown() }
        let (pool, ingestor) = (process.pool, process.ingestor)
        let outcomes = Mutex<[EventInput: EventOutcome]>([:])
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 40) { racer in
            do {
                if racer % 2 == 0 {
                    // A refresh that reverses or rotates the rows.
                    let order = racer % 4 == 0 ? Array(ads.reversed()) : Array(ads[(racer % 10)...] + ads[..<(racer % 10)])
                    let result = try pool.withConnection {
                        try f.feeds.register(FeedSnapshotInput(snapshotID: "feed-\(racer + 1)", ads: order.enumerated().map { F.ad($1, Int32($0)) }),
                                             sessionID: "s1", now: f.clock.now(), on: $0)
                    }
                    if result != .created { failures.withLock { $0.append("registration answered \(result)") } }
                } else {
                    let batch = ads.shuffled().flatMap { [F.event(.impression, "s1", $0), F.event(.click, "s1", $0)] }
                    let result = try ingestor.ingest(batch)
                    outcomes.withLock { for (event, outcome) in zip(batch, result) { $0[event] = outcome } }
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        let all = outcomes.withLock { $0 }
        #expect(all.count == 20 * 20)
        for type in [EventType.impression, .click] {
            for ad in ads {
                #expect(all.filter { $0.key.type == type && $0.key.adID == ad && $0.value == .accepted }.count == 1, "\(type) \(ad)")
            }
        }
        // The rules' view of the feed is the current snapshot's, row for row.
        let mismatched = try f.count("""
            SELECT count(*) FROM session_ads x
            JOIN sessions s ON s.session_id = x.session_id
            LEFT JOIN snapshot_ads a ON a.session_id = x.session_id AND a.snapshot_id = s.current_snapshot_id AND a.ad_id = x.ad_id
            WHERE x.current_snapshot_id IS DISTINCT FROM a.snapshot_id OR x.current_position IS DISTINCT FROM a.position
            """)
        #expect(mismatched == 0)
    }

    @Test func requestWaitingTooLongForACommitterIsAnsweredUnavailableAndNotStored() throws {
        // The only committer is stuck on a row another connection holds. A request queued behind
        // it is answered poolTimeout (503 over HTTP) once it waited queueWait, without a thread
        // waiting for it, and its events never reach the database; the stuck one still commits.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 5)])
        let process = Process(f, committers: 1, queueWait: .milliseconds(300))
        defer { process.shutdown() }
        let ingestor = process.ingestor
        let holder = try Self.holdRow(f, "s1", "ad-1")
        let watcher = try f.database.connect()
        let answers = Mutex<[Int: Result<[EventOutcome], any Error>]>([:])
        ingestor.submit([F.event(.impression, "s1", "ad-1")]) { result in answers.withLock { $0[1] = result } }
        #expect(try Self.eventually { try Self.lockWaiters(watcher) == 1 }, "the first request never waited on the held row")
        ingestor.submit([F.event(.impression, "s1", "ad-2")]) { result in answers.withLock { $0[2] = result } }
        #expect(Self.eventually(within: 10) { answers.withLock { $0[2] != nil } }, "the queued request was never answered")
        var refusal: IngestRefusal?
        if case .failure(let error as IngestRefusal) = answers.withLock({ $0[2] }) { refusal = error }
        #expect(refusal == .waitedTooLong(.milliseconds(300)))
        #expect(ingestor.queuedRequests == 0)
        #expect(answers.withLock { $0[1] == nil })

        try holder.execute("COMMIT")
        #expect(Self.eventually { answers.withLock { $0[1] != nil } }, "the stuck request was never answered")
        #expect(try answers.withLock { $0[1] }?.get() == [.accepted])
        #expect(try f.count("SELECT count(*) FROM events WHERE ad_id = 'ad-2'") == 0)
        #expect(try f.count("SELECT count(*) FROM event_ids WHERE ad_id = 'ad-2'") == 0)
    }

    @Test func requestSharingRowsWithATransactionUnderWayWaitsForIt() throws {
        // A committer's transaction is held on a pair's row by another connection. A second
        // request of that pair must not start a transaction of its own, which would only wait on
        // the same lock, and a request of another pair queued after it goes through meanwhile.
        // Once the first commits, the one held back is taken although no new request arrives.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 5)])
        let process = Process(f, committers: 2)
        defer { process.shutdown() }
        let ingestor = process.ingestor
        let holder = try Self.holdRow(f, "s1", "ad-1")
        let watcher = try f.database.connect()
        func lockWaiters() throws -> Int? { try Self.lockWaiters(watcher) }
        let answers = Mutex<[Int: Result<[EventOutcome], any Error>]>([:])
        let answered = DispatchGroup()
        func send(_ request: Int, _ events: [EventInput]) {
            answered.enter()
            DispatchQueue.global().async {
                let answer = Result { try ingestor.ingest(events) }
                answers.withLock { $0[request] = answer }
                answered.leave()
            }
        }
        func answer(_ request: Int) throws -> [EventOutcome]? { try answers.withLock { $0[request] }?.get() }

        send(1, [F.event(.impression, "s1", "ad-1")])
        #expect(try Self.eventually { try lockWaiters() == 1 }, "the first request never waited on the held row")
        send(2, [F.event(.impression, "s1", "ad-1")])
        #expect(Self.eventually { ingestor.queuedRequests == 1 })
        send(3, [F.event(.impression, "s1", "ad-2")])
        #expect(try Self.eventually(within: 10) { try answer(3) != nil }, "a request of another pair was held up")
        #expect(try answer(3) == [.accepted])
        #expect(try answer(2) == nil)
        #expect(try lockWaiters() == 1)
        #expect(ingestor.queuedRequests == 1)

        try holder.execute("COMMIT")
        #expect(answered.wait(timeout: .now() + 30) == .success, "a request was never answered")
        #expect(try answer(1) == [.accepted])
        #expect(try answer(2) == [.duplicate(.impressionAlreadyCounted)])
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 2)
    }

    @Test func replaysThroughGroupCommitGetTheirOriginalAnswers() throws {
        // The ingestor bets that ids are new; a batch holding a replay loses the bet and must still
        // get every original answer, store nothing twice, and leave the new events decided once.
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0), F.ad("ad-2", 5)])
        let process = Process(f, committers: 1)
        defer { process.shutdown() }
        let ingestor = process.ingestor
        let first = [F.event(.impression, "s1", "ad-1"), F.event(.click, "s1", "ad-1"), F.event(.click, "s1", "ad-9")]
        let answers = try ingestor.ingest(first)
        #expect(answers == [.accepted, .accepted, .rejected(.adNotInFeed)])
        let fresh = [F.event(.impression, "s1", "ad-2"), F.event(.impression, "s1", "ad-1")]
        let mixed = [fresh[0], first[2], first[0], fresh[1], first[1]]
        #expect(try ingestor.ingest(mixed) == [.accepted, .rejected(.adNotInFeed), .accepted, .duplicate(.impressionAlreadyCounted), .accepted])
        // After a taken id the ingestor claims carefully for a while; the answers do not change.
        #expect(try ingestor.ingest(first) == answers)
        #expect(try f.count("SELECT count(*) FROM events") == 5)
        #expect(try f.count("SELECT count(*) FROM event_ids") == 5)
    }

    @Test func racingReplaysThroughTwoIngestorsStoreItOnce() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let event = F.event(.click, "s1", "ad-1")
        let processes = [Process(f), Process(f)]
        defer { processes.forEach { $0.shutdown() } }
        let outcomes = Mutex<[EventOutcome]>([])
        DispatchQueue.concurrentPerform(iterations: 20) { racer in
            do {
                let result = try processes[racer % 2].ingestor.ingest([event])
                outcomes.withLock { $0.append(contentsOf: result) }
            } catch {
                Issue.record("racer failed: \(error)")
            }
        }
        #expect(outcomes.withLock { $0 } == Array(repeating: .accepted, count: 20))
        #expect(try f.count("SELECT count(*) FROM events") == 1)
    }

    @Test func racingReplaysOfOneEventStoreItOnce() throws {
        let f = try F()
        try f.feed("s1", "feed-1", [F.ad("ad-1", 0)])
        let event = F.event(.impression, "s1", "ad-1")
        let outcomes = Mutex<[EventOutcome]>([])
        DispatchQueue.concurrentPerform(iterations: 20) { _ in
            do {
                let connection = try f.database.connect()
                let result = try f.events.ingest([event], receivedAt: .fixed(f.clock.now()), on: connection)
                outcomes.withLock { $0.append(contentsOf: result) }
            } catch {
                Issue.record("racer failed: \(error)")
            }
        }
        #expect(outcomes.withLock { $0 } == Array(repeating: .accepted, count: 20))
        #expect(try f.count("SELECT count(*) FROM events") == 1)
    }

    // MARK: The tap rule and the grace window across processes

    @Test func thePileUpSentAsThreeRequestsToTwoProcessesBillsOneClick() throws {
        let f = try F()
        let processes = [Process(f, clickRule: Self.rulesOf1_2), Process(f, clickRule: Self.rulesOf1_2)]
        defer { processes.forEach { $0.shutdown() } }
        for round in 0..<20 {
            let session = "pile-\(round)"
            try f.feed(session, "feed-\(round)", [F.ad("ad-a", 1), F.ad("ad-b", 2), F.ad("ad-c", 3)])
            let outcomes = Mutex<[EventOutcome]>([])
            DispatchQueue.concurrentPerform(iterations: 3) { handler in
                do {
                    let click = F.event(.click, session, ["ad-a", "ad-b", "ad-c"][handler])
                    let result = try processes[handler % 2].ingestor.ingest([click])
                    outcomes.withLock { $0.append(contentsOf: result) }
                } catch {
                    Issue.record("handler failed: \(error)")
                }
            }
            let answers = outcomes.withLock { $0 }
            #expect(answers.filter { $0 == .accepted }.count == 1, "round \(round): \(answers)")
            #expect(answers.filter { $0 == .duplicate(.simultaneousClick) }.count == 2, "round \(round): \(answers)")
        }
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == 20)
    }

    @Test func aRefreshRacingAGraceClickGivesTheAnswerOfOneOrder() throws {
        // The tap lies 5 minutes in the future (a skewed client clock), so that the grace of feed A
        // covers it only while A is current: click first, it is accepted against A; refresh first,
        // it is judged against B, which holds the ad at another row: stale_snapshot. Either answer
        // is some serial order's; a click judged by half of each is not.
        let f = try F()
        let processes = [Process(f, clickRule: Self.rulesOf1_2), Process(f, clickRule: Self.rulesOf1_2)]
        defer { processes.forEach { $0.shutdown() } }
        let registrar = try f.database.connect()
        let tap = F.start.adding(microseconds: 300 * 1_000_000)
        for round in 0..<50 {
            let session = "race-\(round)"
            try f.feed(session, "A-\(round)", [F.ad("x", 3), F.ad("y", 5)])
            let click = F.event(.click, session, "x", snapshot: "A-\(round)", position: 3, occurredAt: tap)
            let answer = Mutex<EventOutcome?>(nil)
            let refreshed = Mutex<FeedSnapshotStore.RegistrationResult?>(nil)
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                do {
                    if side == 0 {
                        let result = try f.feeds.register(FeedSnapshotInput(snapshotID: "B-\(round)", ads: [F.ad("x", 8), F.ad("y", 5)]),
                                                          sessionID: session, now: f.clock.now(), on: registrar)
                        refreshed.withLock { $0 = result }
                    } else {
                        let result = try processes[round % 2].ingestor.ingest([click])
                        answer.withLock { $0 = result.first }
                    }
                } catch {
                    Issue.record("round \(round) failed: \(error)")
                }
            }
            #expect(refreshed.withLock { $0 } == .created)
            let outcome = try #require(answer.withLock { $0 })
            #expect([EventOutcome.accepted, .rejected(.staleSnapshot)].contains(outcome), "round \(round): \(outcome)")
        }
        // Whatever the interleavings were, the store agrees with the answers.
        #expect(try f.count("SELECT count(*) FROM events WHERE status = 'accepted'") == f.count("SELECT count(*) FROM session_ads WHERE last_click_at IS NOT NULL"))
    }
}
