import Contract

/// A request's events as the store sees them: each event key's first occurrence (a *primary*,
/// decided by the rules) and its later occurrences (*repeats*, answered from the stored event when
/// the id was taken before, else as their primary was, or as a conflict), and the distinct
/// (session, ad) pairs of the primaries, by index, so that no statement sends or returns their ids
/// twice. An id is scoped to its session (API 1.3): the same id in two sessions is two events.
struct EventBatch {
    let events: [EventInput]
    /// The first occurrence of each id, in order.
    let primaries: [Int]
    /// Later occurrences of an id, with the index of its first.
    let repeats: [(index: Int, first: Int)]
    /// The distinct (session, ad) pairs of the primaries, in order of first appearance.
    let pairs: [SessionAd]
    /// For each primary's event index, the index of its pair in `pairs` (repeats have none: the
    /// rules never judge them).
    private let pairOfEvent: [Int: Int]

    init(_ events: [EventInput]) {
        self.events = events
        var firstIndexOfID: [EventKey: Int] = [:]
        firstIndexOfID.reserveCapacity(events.count)
        var primaries: [Int] = []
        primaries.reserveCapacity(events.count)
        var repeats: [(index: Int, first: Int)] = []
        var indexOfPair: [SessionAd: Int] = [:]
        indexOfPair.reserveCapacity(events.count)
        var pairs: [SessionAd] = []
        var pairOfEvent: [Int: Int] = [:]
        pairOfEvent.reserveCapacity(events.count)
        for (index, event) in events.enumerated() {
            let key = EventKey(event)
            if let first = firstIndexOfID[key] {
                repeats.append((index, first))
                continue
            }
            firstIndexOfID[key] = index
            primaries.append(index)
            let pair = SessionAd(sessionID: event.sessionID, adID: event.adID)
            if let known = indexOfPair[pair] {
                pairOfEvent[index] = known
            } else {
                pairOfEvent[index] = pairs.count
                indexOfPair[pair] = pairs.count
                pairs.append(pair)
            }
        }
        self.primaries = primaries
        self.repeats = repeats
        self.pairs = pairs
        self.pairOfEvent = pairOfEvent
    }

    /// The pair of the primary at event index `index`.
    func pair(ofPrimary index: Int) -> Int {
        // Every primary's pair was recorded in `init`; the rules are only ever asked about
        // primaries (repeats are answered from their first occurrence, never judged).
        guard let pair = pairOfEvent[index] else { preconditionFailure("event \(index) is not a primary of the batch") }
        return pair
    }
}

/// The outcome of every event of a batch, filled in as the rules decide them. Every event gets
/// exactly one: `complete()` says so, and an event left without one is a bug in the store that
/// stops the process rather than bill a wrong answer.
struct BatchOutcomes {
    private var outcomes: [EventOutcome?]

    init(count: Int) {
        outcomes = Array(repeating: nil, count: count)
    }

    subscript(index: Int) -> EventOutcome? {
        get { outcomes[index] }
        set { outcomes[index] = newValue }
    }

    /// The outcomes of `indices`, each of which must be decided.
    func decided(_ indices: [Int]) -> [EventOutcome] {
        indices.map { index in
            // The store decides every primary before it stores it (rule 2 or the judge, then the
            // claims settle every impression candidate and its followers).
            guard let outcome = outcomes[index] else { preconditionFailure("event \(index) was stored undecided") }
            return outcome
        }
    }

    /// Every outcome, in request order.
    func complete() -> [EventOutcome] {
        decided(Array(outcomes.indices))
    }
}
