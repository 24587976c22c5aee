@testable import AdTally
import Testing

/// Group commit's scheduling: which queued requests a committer takes while other committers'
/// transactions are under way. (That the rows really are locked, and that a request left queued is
/// still answered, is `ConcurrencyTests.requestSharingRowsWithATransactionUnderWayWaitsForIt`.)
@Suite(.timeLimit(.minutes(5))) struct CommitQueueTests {
    typealias F = StoreFixture

    /// Queues one request per list of events, named by its index.
    static func queue(_ requests: [[EventInput]], committers: Int = 2) -> CommitQueue<Int> {
        var queue = CommitQueue<Int>(committers: committers)
        for (index, events) in requests.enumerated() {
            queue.append(index, events: events.count, rowKeys: CommitQueue<Int>.rowKeys(of: events))
        }
        return queue
    }

    /// On Citus (`grouped`) a transaction takes one session's requests, so that it touches that
    /// session's shard only; the others keep their order for the next transactions, and a request
    /// of several sessions is a transaction of its own.
    @Test func oneSessionPerTransactionTakesTheFirstRequestsSessionOnly() {
        let requests = [[F.event(.impression, "s1", "ad-1")], [F.event(.impression, "s2", "ad-1")],
                        [F.event(.impression, "s1", "ad-2")], [F.event(.impression, "s2", "ad-2"), F.event(.impression, "s3", "ad-1")],
                        [F.event(.impression, "s2", "ad-2")], [F.event(.impression, "s4", "ad-1")]]
        var queue = CommitQueue<Int>(committers: 2)
        for (index, events) in requests.enumerated() {
            queue.append(index, events: events.count, rowKeys: CommitQueue<Int>.rowKeys(of: events),
                         group: EventTopology.onlySession(events.map(\.sessionID)).map { .session($0) })
        }
        #expect(queue.take(for: 0, maximumEvents: 100, grouped: true) == [0, 2])
        // Request 4 (s2) shares a pair with request 3 (s2 and s3), queued before it: it does not
        // overtake it, though it is of the session committer 1 takes.
        #expect(queue.take(for: 1, maximumEvents: 100, grouped: true) == [1])
        #expect(queue.take(for: 0, maximumEvents: 100, grouped: true) == [3])
        #expect(queue.take(for: 1, maximumEvents: 100, grouped: true) == [5])
        #expect(queue.take(for: 0, maximumEvents: 100, grouped: true) == [4])
        #expect(queue.count == 0)
        // Without it, whatever is queued goes together.
        var mixed = Self.queue(requests)
        #expect(mixed.take(for: 0, maximumEvents: 100) == [0, 1, 2, 3, 4, 5])
    }

    /// Routed (`TransactionGroup.shard`): a transaction takes the requests of every session of the
    /// first one's shard, and no more than `transactionsPerShard` transactions of one shard run at
    /// once; a request held back for its shard's limit keeps its rows' order; a shard's requests go
    /// beside none of another shard's.
    @Test func aShardsSessionsShareTransactionsUpToItsLimit() {
        // Sessions s1, s2 in shard 10 (node 1); s3 in shard 20 (node 2); s2+s3 in one request: no group.
        let requests: [([EventInput], TransactionGroup?)] = [
            ([F.event(.impression, "s1", "ad-1")], .shard(10, node: 1)), ([F.event(.impression, "s3", "ad-1")], .shard(20, node: 2)),
            ([F.event(.impression, "s2", "ad-1")], .shard(10, node: 1)), ([F.event(.impression, "s2", "ad-2"), F.event(.impression, "s3", "ad-2")], nil),
            ([F.event(.impression, "s1", "ad-3")], .shard(10, node: 1)), ([F.event(.impression, "s2", "ad-2")], .shard(10, node: 1)),
        ]
        var queue = CommitQueue<Int>(committers: 4, transactionsPerShard: 1)
        for (index, (events, group)) in requests.enumerated() {
            queue.append(index, events: events.count, rowKeys: CommitQueue<Int>.rowKeys(of: events), group: group)
        }
        // Shard 10's sessions together, but not request 5 (s2, ad-2): it shares a pair with
        // request 3, queued before it, which is of no group.
        #expect(queue.take(for: 0, maximumEvents: 100, grouped: true) == [0, 2, 4])
        // Shard 10 runs its one transaction: committer 1 takes shard 20's, and committer 2 the
        // request of no group, alone; nothing is left that another committer may take now.
        #expect(queue.take(for: 1, maximumEvents: 100, grouped: true) == [1])
        #expect(queue.take(for: 2, maximumEvents: 100, grouped: true) == [3])
        #expect(queue.take(for: 3, maximumEvents: 100, grouped: true) == [])
        // Committer 0 is done with shard 10's transaction, but request 5 still waits for request
        // 3's rows; once committer 2 is done with them, it goes.
        #expect(queue.take(for: 0, maximumEvents: 100, grouped: true) == [])
        #expect(queue.take(for: 2, maximumEvents: 100, grouped: true) == [5])
        #expect(queue.count == 0)

        // With a limit of 2, a second committer takes shard 10's next requests while the first runs.
        var two = CommitQueue<Int>(committers: 3, transactionsPerShard: 2)
        for index in 0..<6 {
            two.append(index, events: 1, rowKeys: [index], group: .shard(10, node: 1))
        }
        #expect(two.take(for: 0, maximumEvents: 2, grouped: true) == [0, 1])
        #expect(two.take(for: 1, maximumEvents: 2, grouped: true) == [2, 3])
        #expect(two.take(for: 2, maximumEvents: 2, grouped: true) == [])
        #expect(two.take(for: 0, maximumEvents: 2, grouped: true) == [4, 5])
        // Several shards of one node (`node`): a group of its own, with no limit.
        var spread = CommitQueue<Int>(committers: 2, transactionsPerShard: 1)
        spread.append(0, events: 1, rowKeys: [0], group: .node(1))
        spread.append(1, events: 1, rowKeys: [1], group: .node(1))
        #expect(spread.take(for: 0, maximumEvents: 1, grouped: true) == [0])
        #expect(spread.take(for: 1, maximumEvents: 1, grouped: true) == [1])
    }

    /// One client's flood of batches, however deep, delays another client's request by one
    /// transaction, not by the flood: with several clients queued, each one's first request comes
    /// first, then their next ones weighted by size; a client alone is taken in queue order, as
    /// before. Items come back in queue order.
    @Test func clientsTakeTurnsWhenSeveralAreQueued() {
        var queue = CommitQueue<Int>(committers: 1)
        for index in 0..<30 { queue.append(index, events: 500, rowKeys: [index], client: 1) }
        queue.append(100, events: 1, rowKeys: [100], client: 2)
        // The flood's first 500, the other client's 1, then the flood up to 5,000.
        #expect(queue.take(for: 0, maximumEvents: 5_000) == Array(0...8) + [100])
        // The flood alone: in order, up to the limit.
        #expect(queue.take(for: 0, maximumEvents: 5_000) == Array(9...18))
        // A large first request of a third client comes in the next transaction, beside the
        // flood's first.
        queue.append(200, events: 4_000, rowKeys: [200], client: 3)
        #expect(queue.take(for: 0, maximumEvents: 5_000) == [19, 20, 200])
        // Turns weighted by events: client 4's third batch of 100 (200 before it) comes before the
        // flood's next (500 before it).
        for index in 300..<303 { queue.append(index, events: 100, rowKeys: [index], client: 4) }
        #expect(queue.take(for: 0, maximumEvents: 800) == [21, 300, 301, 302])
        #expect(queue.count == 8)
    }

    /// With several clients queued, a request held back (its rows busy in another committer's
    /// transaction) holds its rows back for the requests considered after it, whatever their client.
    @Test func turnsBetweenClientsKeepTheRowsRule() {
        var queue = CommitQueue<Int>(committers: 2)
        queue.append(0, events: 1, rowKeys: [1], client: 1)
        #expect(queue.take(for: 1, maximumEvents: 10) == [0])
        // Committer 1 holds row 1.
        queue.append(1, events: 1, rowKeys: [1, 2], client: 1)
        queue.append(2, events: 1, rowKeys: [2], client: 2)
        queue.append(3, events: 1, rowKeys: [3], client: 2)
        #expect(queue.take(for: 0, maximumEvents: 10) == [3])
        #expect(queue.take(for: 1, maximumEvents: 10) == [1, 2])
        #expect(queue.count == 0)
    }

    @Test func idleCommitterTakesEverythingInOrderUpToTheLimit() {
        var queue = Self.queue([[F.event(.impression, "s1", "ad-1")], [F.event(.click, "s2", "ad-1")],
                                [F.event(.impression, "s3", "ad-1"), F.event(.impression, "s3", "ad-2")]])
        #expect(queue.take(for: 0, maximumEvents: 3) == [0, 1])
        #expect(queue.count == 1)
        // The first request that can be taken is taken whatever its size.
        #expect(queue.take(for: 0, maximumEvents: 1) == [2])
        #expect(queue.take(for: 0, maximumEvents: 1) == [])
    }

    @Test func requestSharingAPairWithAnotherTransactionWaitsForItsCommitter() {
        var queue = Self.queue([[F.event(.impression, "s1", "ad-1")]])
        #expect(queue.take(for: 0, maximumEvents: 100) == [0])
        // Committer 0's transaction holds s1/ad-1. Another event of that pair (other type, other id)
        // waits; one of another pair of the same session, queued after it, does not.
        queue.append(1, events: 1, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.click, "s1", "ad-1")]))
        queue.append(2, events: 1, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s1", "ad-2")]))
        #expect(queue.take(for: 1, maximumEvents: 100) == [2])
        #expect(queue.take(for: 1, maximumEvents: 100) == [])
        #expect(queue.count == 1)
        // Committer 0, back from its commit, takes it.
        #expect(queue.take(for: 0, maximumEvents: 100) == [1])
        #expect(queue.count == 0)
    }

    @Test func requestSharingAnEventIDWithAnotherTransactionWaits() {
        // A retried request while its first attempt is in a transaction: its ledger row is locked.
        // (An id is its session's since API 1.3: the retry names the same session.)
        let event = F.event(.impression, "s1", "ad-1")
        var queue = Self.queue([[event], [F.event(.impression, "s1", "ad-9", id: event.eventID)]])
        #expect(queue.take(for: 0, maximumEvents: 1) == [0])
        #expect(queue.take(for: 1, maximumEvents: 100) == [])
        #expect(queue.take(for: 0, maximumEvents: 100) == [1])
    }

    @Test func theSameIDInAnotherSessionIsAnotherRowAndDoesNotWait() {
        let event = F.event(.impression, "s1", "ad-1")
        var queue = Self.queue([[event], [F.event(.impression, "s9", "ad-9", id: event.eventID)]])
        #expect(queue.take(for: 0, maximumEvents: 1) == [0])
        #expect(queue.take(for: 1, maximumEvents: 100) == [1])
    }

    @Test func noRequestOvertakesAHeldBackOneSharingItsRows() {
        // Request 1 names pairs of both committers' transactions. Requests 2 and 3 share a pair
        // with it and come later: neither may go first, or a stream of them could starve it.
        var queue = Self.queue([[F.event(.impression, "s1", "ad-1")], [F.event(.impression, "s2", "ad-1")]], committers: 3)
        #expect(queue.take(for: 0, maximumEvents: 1) == [0])
        #expect(queue.take(for: 1, maximumEvents: 1) == [1])
        queue.append(2, events: 2, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.click, "s1", "ad-1"), F.event(.click, "s2", "ad-1")]))
        queue.append(3, events: 1, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s1", "ad-1")]))
        queue.append(4, events: 1, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s3", "ad-1")]))
        #expect(queue.take(for: 2, maximumEvents: 100) == [4])
        // Committer 0 is back, committer 1 still holds s2/ad-1: request 2 still waits, and so does
        // request 3, although s1/ad-1 is free now.
        #expect(queue.take(for: 0, maximumEvents: 100) == [])
        #expect(queue.take(for: 1, maximumEvents: 100) == [2, 3])
    }

    @Test func sharedRowsInOneQueuedBatchGoTogether() {
        // Requests are held back only by other committers' transactions: one committer takes two
        // requests of the same pair in one transaction, where the store settles the repeat.
        var queue = Self.queue([[F.event(.impression, "s1", "ad-1")], [F.event(.impression, "s1", "ad-1")]])
        #expect(queue.take(for: 1, maximumEvents: 100) == [0, 1])
    }

    @Test func heldBackRequestsDoNotCountTowardsTheLimit() {
        var queue = Self.queue([[F.event(.impression, "s1", "ad-1")]], committers: 3)
        #expect(queue.take(for: 0, maximumEvents: 100) == [0])
        let pairOfZero = (0..<40).map { _ in F.event(.impression, "s1", "ad-1") }
        queue.append(1, events: 2, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s2", "ad-1"), F.event(.impression, "s2", "ad-2")]))
        queue.append(2, events: 40, rowKeys: CommitQueue<Int>.rowKeys(of: pairOfZero))
        queue.append(3, events: 2, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s3", "ad-1"), F.event(.impression, "s3", "ad-2")]))
        queue.append(4, events: 1, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s4", "ad-1")]))
        // Request 2 waits for committer 0 and is passed over; the limit stops at request 4.
        #expect(queue.take(for: 1, maximumEvents: 4) == [1, 3])
        // Committer 1's transaction holds nothing of request 2: committer 2 takes the rest but it.
        #expect(queue.take(for: 2, maximumEvents: 100) == [4])
        #expect(queue.take(for: 0, maximumEvents: 100) == [2])
    }

    @Test func aCommitterWithoutATransactionHoldsNothingBack() {
        var queue = Self.queue([[F.event(.impression, "s1", "ad-1")]])
        #expect(queue.take(for: 0, maximumEvents: 100) == [0])
        // Committer 0 comes back to an empty queue: its transaction is over.
        #expect(queue.take(for: 0, maximumEvents: 100) == [])
        queue.append(1, events: 1, rowKeys: CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s1", "ad-1")]))
        #expect(queue.take(for: 1, maximumEvents: 100) == [1])
    }

    @Test func withdrawnAndRemovedRequestsLeaveTheQueue() {
        var queue = Self.queue([[F.event(.impression, "s1", "ad-1")], [F.event(.impression, "s2", "ad-1")],
                                [F.event(.impression, "s3", "ad-1")], [F.event(.impression, "s4", "ad-1")]])
        #expect(queue.removeAll { $0 % 2 == 1 } == [1, 3])
        #expect(queue.removeAll { $0 == 1 } == [])
        #expect(queue.removeAll() == [0, 2])
        #expect(queue.count == 0)
    }

    @Test func rowKeysNamePairsAndIDs() {
        let a = F.event(.impression, "s1", "ad-1")
        let keys = CommitQueue<Int>.rowKeys(of: [a, F.event(.click, "s1", "ad-1"), F.event(.impression, "s1", "ad-2"),
                                                 F.event(.impression, "s2", "ad-1"), F.event(.impression, "s1ad", "-1")])
        // Two keys an impression (pair, id), three a click (pair, id, session).
        #expect(keys.count == 11)
        #expect(keys[0] == keys[2])  // the same pair, whatever the type
        #expect(Set([keys[0], keys[5], keys[7], keys[9]]).count == 4)  // other pairs, including a split that concatenates the same
        #expect(Set([1, 3, 6, 8, 10].map { keys[$0] }).count == 5)  // every id its own
        #expect(!Set(keys.enumerated().filter { $0.offset != 4 }.map(\.element)).contains(keys[4]))  // the session's own key
        #expect(CommitQueue<Int>.rowKeys(of: [a])[1] == keys[1])
    }

    @Test func clicksOfOneSessionShareItsRowAndImpressionsDoNot() {
        // Clicks are decided under their session's row lock, impressions under their pair's only.
        let clickA = CommitQueue<Int>.rowKeys(of: [F.event(.click, "s1", "ad-1")])
        let clickB = CommitQueue<Int>.rowKeys(of: [F.event(.click, "s1", "ad-2")])
        let impression = CommitQueue<Int>.rowKeys(of: [F.event(.impression, "s1", "ad-2")])
        #expect(!Set(clickA).isDisjoint(with: clickB))
        #expect(Set(clickA).isDisjoint(with: impression))
        var queue = Self.queue([[F.event(.click, "s1", "ad-1")], [F.event(.click, "s1", "ad-2")], [F.event(.impression, "s1", "ad-3")]])
        #expect(queue.take(for: 0, maximumEvents: 1) == [0])
        // The second click waits for the first one's transaction; the impression goes with another committer.
        #expect(queue.take(for: 1, maximumEvents: 100) == [2])
        #expect(queue.take(for: 0, maximumEvents: 100) == [1])
    }
}
