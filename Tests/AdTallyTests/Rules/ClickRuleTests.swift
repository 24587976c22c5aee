import AdTally
import Contract
import Testing
import Timestamps

/// Rule 4 hit directly, with fixed instants: every check in its order, and both sides of each
/// boundary of the grace interval, the click window and the tap window.
@Suite(.timeLimit(.minutes(3))) struct ClickRuleTests {
    /// 2026-11-29T13:47:00Z, and instants relative to it.
    static let t0 = Timestamp(microsecondsSinceEpoch: 1_795_960_020_000_000)
    static func at(seconds: Double) -> Timestamp { t0.adding(microseconds: Int64((seconds * 1_000_000).rounded())) }
    static func at(microseconds: Int64) -> Timestamp { t0.adding(microseconds: microseconds) }

    static let rule = ClickRule(windowSeconds: 30, graceSeconds: 30, tapWindowMilliseconds: 1_000, needsImpression: false, sessionClickLimit: 0)

    static func click(_ ad: String = "x", snapshot: String? = nil, position: Int32? = nil, at occurredAt: Timestamp = t0) -> EventInput {
        EventInput(eventID: "00000000-0000-4000-8000-000000000001", type: .click, sessionID: "s", adID: ad, occurredAt: occurredAt,
                   snapshotID: snapshot, position: position)
    }

    /// Feed B is current (x at row 7); feed A, where x was at row 3, was current from t0 - 60 s to t0.
    static func facts(current: ClickRule.Feed? = ClickRule.Feed(snapshotID: "B", adPosition: 7), aPosition: Int32? = 3,
                      lastOnAd: Timestamp? = nil, lastInSession: ClickRule.AcceptedClick? = nil) -> ClickRule.Facts {
        ClickRule.Facts(current: current,
                        named: ClickRule.EarlierSnapshot(feed: ClickRule.Feed(snapshotID: "A", adPosition: aPosition),
                                                         registeredAt: at(seconds: -60), replacedAt: t0),
                        lastAcceptedOnAdReceivedAt: lastOnAd, lastAcceptedInSession: lastInSession)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let rule: ClickRule
        let click: EventInput
        let facts: ClickRule.Facts
        let expected: EventOutcome
        var testDescription: String { name }
    }

    static let received = at(seconds: 100)

    static let cases: [Case] = [
        // The feed and its checks, in order.
        Case(name: "the current feed holds the ad at the named row", rule: rule, click: click(snapshot: "B", position: 7), facts: facts(), expected: .accepted),
        Case(name: "no snapshot at all", rule: rule, click: click(), facts: ClickRule.Facts(), expected: .rejected(.adNotInFeed)),
        Case(name: "ad not in the current feed", rule: rule, click: click(snapshot: "B"),
             facts: facts(current: ClickRule.Feed(snapshotID: "B", adPosition: nil)), expected: .rejected(.adNotInFeed)),
        Case(name: "a snapshot the session never had is stale", rule: rule, click: click(snapshot: "Z"),
             facts: ClickRule.Facts(current: ClickRule.Feed(snapshotID: "B", adPosition: 7)), expected: .rejected(.staleSnapshot)),
        Case(name: "the ad's feed comes before the named snapshot", rule: rule, click: click(snapshot: "Z"),
             facts: ClickRule.Facts(current: ClickRule.Feed(snapshotID: "B", adPosition: nil)), expected: .rejected(.adNotInFeed)),
        Case(name: "another row", rule: rule, click: click(snapshot: "B", position: 3), facts: facts(), expected: .rejected(.positionMismatch)),
        Case(name: "no snapshot named, the current row", rule: rule, click: click(position: 7), facts: facts(), expected: .accepted),
        // The grace window: [registered_at(A) - G, replaced_at(A) + G) = [t0 - 90 s, t0 + 30 s).
        Case(name: "tapped while A was current", rule: rule, click: click(snapshot: "A", position: 3, at: at(seconds: -10)), facts: facts(), expected: .accepted),
        Case(name: "grace: lower bound is inside", rule: rule, click: click(snapshot: "A", at: at(seconds: -90)), facts: facts(), expected: .accepted),
        Case(name: "grace: just before the lower bound", rule: rule, click: click(snapshot: "A", at: at(microseconds: -90_000_001)), facts: facts(),
             expected: .rejected(.staleSnapshot)),
        Case(name: "grace: just before the upper bound", rule: rule, click: click(snapshot: "A", at: at(microseconds: 29_999_999)), facts: facts(),
             expected: .accepted),
        Case(name: "grace: upper bound is outside", rule: rule, click: click(snapshot: "A", at: at(seconds: 30)), facts: facts(),
             expected: .rejected(.staleSnapshot)),
        Case(name: "grace: outside, and the ad is gone from the current feed", rule: rule, click: click(snapshot: "A", at: at(seconds: 31)),
             facts: facts(current: ClickRule.Feed(snapshotID: "B", adPosition: nil)), expected: .rejected(.adNotInFeed)),
        Case(name: "grace: the row of A, not of B", rule: rule, click: click(snapshot: "A", position: 7, at: at(seconds: -10)), facts: facts(),
             expected: .rejected(.positionMismatch)),
        Case(name: "grace: the ad was not in A", rule: rule, click: click(snapshot: "A", at: at(seconds: -10)), facts: facts(aPosition: nil),
             expected: .rejected(.adNotInFeed)),
        Case(name: "grace off: A is stale even while it was current", rule: ClickRule(windowSeconds: 30, graceSeconds: 0, tapWindowMilliseconds: 1_000, needsImpression: false, sessionClickLimit: 0),
             click: click(snapshot: "A", at: at(seconds: -10)), facts: facts(), expected: .rejected(.staleSnapshot)),
        // The click window, on received_at: a click received exactly W after the last one is not within it.
        Case(name: "window: W seconds later is outside", rule: rule, click: click(), facts: facts(lastOnAd: at(seconds: 70)), expected: .accepted),
        Case(name: "window: just under W later is inside", rule: rule, click: click(),
             facts: facts(lastOnAd: at(microseconds: 70_000_001)), expected: .duplicate(.clickWithinWindow)),
        Case(name: "window: whichever snapshot the last click was judged against", rule: rule, click: click(snapshot: "A", at: at(seconds: -10)),
             facts: facts(lastOnAd: at(seconds: 99)), expected: .duplicate(.clickWithinWindow)),
        Case(name: "window off: the same instant is not a duplicate", rule: ClickRule(windowSeconds: 0, graceSeconds: 30, tapWindowMilliseconds: 0, needsImpression: false, sessionClickLimit: 0),
             click: click(), facts: facts(lastOnAd: received), expected: .accepted),
        Case(name: "the window comes before the tap rule", rule: rule, click: click(),
             facts: facts(lastOnAd: at(seconds: 99), lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)),
             expected: .duplicate(.clickWithinWindow)),
        // The tap rule, on occurred_at: less than T apart, before or after, on another ad.
        Case(name: "tap: the same instant on another ad", rule: rule, click: click(),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .duplicate(.simultaneousClick)),
        Case(name: "tap: just under T after", rule: rule, click: click(at: at(microseconds: 999_999)),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .duplicate(.simultaneousClick)),
        Case(name: "tap: just under T before", rule: rule, click: click(at: at(microseconds: -999_999)),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .duplicate(.simultaneousClick)),
        Case(name: "tap: exactly T after is another tap", rule: rule, click: click(at: at(seconds: 1)),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .accepted),
        Case(name: "tap: exactly T before is another tap", rule: rule, click: click(at: at(seconds: -1)),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .accepted),
        Case(name: "tap: the last accepted click was on this ad", rule: rule, click: click(),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "x", occurredAt: t0)), expected: .accepted),
        Case(name: "tap: 1.5 s apart", rule: rule, click: click(at: at(seconds: 1.5)),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .accepted),
        Case(name: "tap off", rule: ClickRule(windowSeconds: 30, graceSeconds: 30, tapWindowMilliseconds: 0, needsImpression: false, sessionClickLimit: 0), click: click(),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .accepted),
        Case(name: "tap: a rejected click comes first", rule: rule, click: click(snapshot: "B", position: 1),
             facts: facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), expected: .rejected(.positionMismatch)),
    ]

    @Test(arguments: cases) func judges(_ c: Case) {
        #expect(c.rule.judge(c.click, c.facts, receivedAt: Self.received) == c.expected)
    }

    /// API 1.3's two checks, in their places: the impression after the feed, the row and the
    /// snapshot; the session's limit after the click window and the tap rule.
    static let strict = ClickRule(windowSeconds: 30, graceSeconds: 30, tapWindowMilliseconds: 1_000, needsImpression: true, sessionClickLimit: 3)

    static func seen(_ facts: ClickRule.Facts = facts(), counted: Bool = true, thisHour: Int = 0) -> ClickRule.Facts {
        var facts = facts
        facts.impressionCounted = counted
        facts.acceptedClicksThisHour = thisHour
        return facts
    }

    static let cases13: [Case] = [
        Case(name: "an impression counted, a click on it", rule: strict, click: click(snapshot: "B", position: 7), facts: seen(), expected: .accepted),
        Case(name: "no impression counted", rule: strict, click: click(snapshot: "B", position: 7), facts: seen(counted: false),
             expected: .rejected(.noImpression)),
        Case(name: "not in the feed comes before no impression", rule: strict, click: click(),
             facts: seen(facts(current: ClickRule.Feed(snapshotID: "B", adPosition: nil)), counted: false), expected: .rejected(.adNotInFeed)),
        Case(name: "a stale snapshot comes before no impression", rule: strict, click: click(snapshot: "Z"),
             facts: seen(ClickRule.Facts(current: ClickRule.Feed(snapshotID: "B", adPosition: 7)), counted: false), expected: .rejected(.staleSnapshot)),
        Case(name: "another row comes before no impression", rule: strict, click: click(snapshot: "B", position: 3), facts: seen(counted: false),
             expected: .rejected(.positionMismatch)),
        Case(name: "no impression comes before the click window", rule: strict, click: click(),
             facts: seen(facts(lastOnAd: at(seconds: 99)), counted: false), expected: .rejected(.noImpression)),
        Case(name: "switched off, a click needs no impression", rule: ClickRule.configured(needsImpression: false, sessionClickLimit: 3), click: click(),
             facts: seen(counted: false), expected: .accepted),
        Case(name: "limit: the third click of the hour", rule: strict, click: click(), facts: seen(thisHour: 2), expected: .accepted),
        Case(name: "limit: the fourth click of the hour", rule: strict, click: click(), facts: seen(thisHour: 3),
             expected: .rejected(.clickLimitExceeded)),
        Case(name: "limit: the click window comes first", rule: strict, click: click(), facts: seen(facts(lastOnAd: at(seconds: 99)), thisHour: 3),
             expected: .duplicate(.clickWithinWindow)),
        Case(name: "limit: the tap rule comes first", rule: strict, click: click(),
             facts: seen(facts(lastInSession: ClickRule.AcceptedClick(adID: "y", occurredAt: t0)), thisHour: 3),
             expected: .duplicate(.simultaneousClick)),
        Case(name: "limit 0: no limit", rule: ClickRule.configured(needsImpression: true, sessionClickLimit: 0), click: click(), facts: seen(thisHour: 10_000),
             expected: .accepted),
    ]

    @Test(arguments: cases13) func judgesTheChecksOf1_3(_ c: Case) {
        #expect(c.rule.judge(c.click, c.facts, receivedAt: Self.received) == c.expected)
    }

    @Test func theClockHourIsTheUTCHourOfReceivedAt() {
        // 2026-11-29T13:47:00Z is in the hour from 13:00:00Z; 14:00:00Z starts the next.
        let thirteen = Timestamp(microsecondsSinceEpoch: 1_795_957_200_000_000)
        #expect(ClickRule.clockHour(of: Self.t0) == thirteen)
        #expect(ClickRule.clockHour(of: thirteen) == thirteen)
        #expect(ClickRule.clockHour(of: thirteen.adding(microseconds: -1)) == thirteen.adding(microseconds: -3_600_000_000))
        #expect(ClickRule.clockHour(of: thirteen.adding(microseconds: 3_600_000_000)) == thirteen.adding(microseconds: 3_600_000_000))
        // Before 1970 too.
        #expect(ClickRule.clockHour(of: Timestamp(microsecondsSinceEpoch: -1)) == Timestamp(microsecondsSinceEpoch: -3_600_000_000))
    }

    @Test func theFeedIsTheNamedSnapshotOnlyInsideItsGrace() {
        #expect(Self.rule.feed(of: Self.click(snapshot: "A", at: Self.at(seconds: -10)), Self.facts())?.snapshotID == "A")
        #expect(Self.rule.feed(of: Self.click(snapshot: "A", at: Self.at(seconds: 45)), Self.facts())?.snapshotID == "B")
        #expect(Self.rule.feed(of: Self.click(at: Self.at(seconds: -10)), Self.facts(current: nil)) == nil)
    }

    @Test func extremeInstantsDoNotTrap() {
        let far = ClickRule.configured(windowSeconds: 86_400, graceSeconds: 3_600, tapWindowMilliseconds: 60_000)
        let low = Timestamp(microsecondsSinceEpoch: .min), high = Timestamp(microsecondsSinceEpoch: .max)
        #expect(!far.isSimultaneous(low, high))
        #expect(far.isWithinClickWindow(lastAcceptedReceivedAt: high, receivedAt: low))
        #expect(!far.isWithinClickWindow(lastAcceptedReceivedAt: low, receivedAt: high))
    }
}
