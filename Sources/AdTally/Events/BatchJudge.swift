import Contract
import Timestamps

/// Applies the traffic filters and rules 3 and 4 to a batch's fresh events in request order,
/// keeping what earlier events of the batch changed: the pairs with a candidate impression, the
/// accepted clicks. The rules themselves are `TrafficFilterRule`, `ImpressionRule` and `ClickRule`;
/// this is only their bookkeeping over a batch.
struct BatchJudge {
    let clickRule: ClickRule
    let batch: EventBatch
    let facts: BatchFacts
    let receivedAt: Timestamp
    /// By pair index: the event index of the impression that claims the pair, if any.
    private var candidate: [Int: Int] = [:]
    /// The pairs that have a candidate, in the order they got it.
    private(set) var impressionCandidatePairs: [Int] = []
    /// Impressions of a pair after its candidate: settled with it, once it is known whether the
    /// pair is still served.
    private var followers: [Int: [Int]] = [:]
    /// The last click accepted in this batch, per pair index and per session.
    private var acceptedClickOnPair: [Int: String] = [:]
    private var acceptedInSession: [String: ClickRule.AcceptedClick] = [:]
    /// Clicks accepted in this batch, per session (all in the clock hour of `receivedAt`).
    private var acceptedCountInSession: [String: Int] = [:]
    /// The UTC clock hour of `receivedAt`, in which the session's click limit counts.
    private let hour: Timestamp

    init(clickRule: ClickRule, batch: EventBatch, facts: BatchFacts, receivedAt: Timestamp) {
        self.clickRule = clickRule
        self.batch = batch
        self.facts = facts
        self.receivedAt = receivedAt
        self.hour = ClickRule.clockHour(of: receivedAt)
    }

    /// The outcome of the primary at `index` now, or nil for an impression whose pair's claim
    /// settles it (`settleImpressions`).
    mutating func decide(_ index: Int) -> EventOutcome? {
        let event = batch.events[index]
        if let filtered = TrafficFilterRule.judge(event) { return filtered }
        let pair = batch.pair(ofPrimary: index)
        switch event.type {
        case .impression:
            if candidate[pair] != nil {
                followers[pair, default: []].append(index)
                return nil
            }
            let row = facts.pairs[pair]
            switch ImpressionRule.judge(event, ImpressionRule.Facts(served: row != nil, counted: row?.impressionCounted ?? false)) {
            case .claim:
                candidate[pair] = index
                impressionCandidatePairs.append(pair)
                return nil
            case .outcome(let outcome):
                return outcome
            }
        case .click:
            let outcome = clickRule.judge(event, clickFacts(event, pair), receivedAt: receivedAt)
            if outcome == .accepted {
                acceptedClickOnPair[pair] = event.eventID
                acceptedInSession[event.sessionID] = ClickRule.AcceptedClick(adID: event.adID, occurredAt: event.occurredAt)
                acceptedCountInSession[event.sessionID, default: 0] += 1
            }
            return outcome
        }
    }

    /// What the click rule asks about `click`: the session's state as read under its lock, with
    /// this batch's earlier accepted clicks applied.
    private func clickFacts(_ click: EventInput, _ pair: Int) -> ClickRule.Facts {
        let session = facts.sessions[click.sessionID]
        let row = facts.pairs[pair]
        var result = ClickRule.Facts()
        if let current = session?.currentSnapshotID {
            result.current = ClickRule.Feed(snapshotID: current, adPosition: row?.currentPosition)
        }
        if let named = click.snapshotID, named != session?.currentSnapshotID,
           let snapshot = facts.earlierSnapshots[SessionSnapshot(sessionID: click.sessionID, snapshotID: named)],
           let replacedAt = snapshot.replacedAt {
            let position = facts.snapshotPositions[SnapshotAd(sessionID: click.sessionID, snapshotID: named, adID: click.adID)]
            result.named = ClickRule.EarlierSnapshot(feed: ClickRule.Feed(snapshotID: named, adPosition: position),
                                                     registeredAt: snapshot.registeredAt, replacedAt: replacedAt)
        }
        result.lastAcceptedOnAdReceivedAt = acceptedClickOnPair[pair] != nil ? receivedAt : row?.lastClickAt
        result.lastAcceptedInSession = acceptedInSession[click.sessionID] ?? session?.lastAcceptedClick
        // Counted before, or earlier in this batch: a candidate impression is accepted, or loses to
        // a concurrent one that was; either way the pair's impression is counted.
        result.impressionCounted = (row?.impressionCounted ?? false) || candidate[pair] != nil
        result.acceptedClicksThisHour = (session?.acceptedClicks(inHour: hour) ?? 0) + acceptedCountInSession[click.sessionID, default: 0]
        return result
    }

    /// The claims on the pairs' rows, in key order.
    func claims() -> [CountingState.PairClaim] {
        var claims: [CountingState.PairClaim] = []
        claims.reserveCapacity(impressionCandidatePairs.count + acceptedClickOnPair.count)
        for (pair, impression) in candidate {
            claims.append(CountingState.PairClaim(pair: batch.pairs[pair], pairIndex: pair, impressionEventID: batch.events[impression].eventID,
                                                  clickEventID: acceptedClickOnPair[pair]))
        }
        for (pair, eventID) in acceptedClickOnPair where candidate[pair] == nil {
            claims.append(CountingState.PairClaim(pair: batch.pairs[pair], pairIndex: pair, impressionEventID: nil, clickEventID: eventID))
        }
        return claims.sorted { $0.pair < $1.pair }
    }

    /// The outcomes of the impressions left to their claims: the candidate is accepted if it won;
    /// otherwise a concurrent claim counted the pair first (a duplicate), or the pair's row went
    /// away and the ad is no longer served. Followers repeat the candidate's pair.
    func settleImpressions(won: Set<Int>, stillServed: Set<Int>) -> [(index: Int, outcome: EventOutcome)] {
        var settled: [(index: Int, outcome: EventOutcome)] = []
        settled.reserveCapacity(impressionCandidatePairs.count)
        for pair in impressionCandidatePairs {
            // A pair is in `impressionCandidatePairs` exactly when it has a candidate (`decide`).
            guard let first = candidate[pair] else { preconditionFailure("pair \(pair) has no impression candidate") }
            let served = won.contains(pair) || stillServed.contains(pair)
            for index in [first] + (followers[pair] ?? []) {
                if index == first && won.contains(pair) {
                    settled.append((index, .accepted))
                } else {
                    switch ImpressionRule.judge(batch.events[index], ImpressionRule.Facts(served: served, counted: true)) {
                    case .outcome(let outcome):
                        settled.append((index, outcome))
                    case .claim:
                        // With `counted: true` the rule never asks for a claim.
                        preconditionFailure("an impression of a counted pair asked for a claim")
                    }
                }
            }
        }
        return settled
    }

    /// What to record on each session whose clicks this batch accepted: its last accepted click and
    /// its accepted clicks in this hour, in session order (the order rows are locked in).
    func sessionClicks() -> [CountingState.SessionClicks] {
        acceptedInSession.map { sessionID, last in
            let before = facts.sessions[sessionID]?.acceptedClicks(inHour: hour) ?? 0
            return CountingState.SessionClicks(sessionID: sessionID, last: last, hour: hour,
                                               clicksInHour: before + acceptedCountInSession[sessionID, default: 0])
        }.sorted { $0.sessionID.utf8Precedes($1.sessionID) }
    }
}
