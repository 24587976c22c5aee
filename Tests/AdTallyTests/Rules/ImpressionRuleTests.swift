import AdTally
import Testing
import Timestamps

/// Rule 3 hit directly: served, then viewable, then first; each threshold on both sides.
@Suite(.timeLimit(.minutes(3))) struct ImpressionRuleTests {
    static func impression(_ visibility: Visibility?) -> EventInput {
        EventInput(eventID: "00000000-0000-4000-8000-000000000002", type: .impression, sessionID: "s", adID: "x",
                   occurredAt: Timestamp(microsecondsSinceEpoch: 0), visibility: visibility)
    }

    @Test(arguments: [
        (nil, true), (Visibility(fraction: 0.5, milliseconds: 1_000), true), (Visibility(fraction: 1, milliseconds: 86_400_000), true),
        (Visibility(fraction: 0.49999, milliseconds: 5_000), false), (Visibility(fraction: 0.5, milliseconds: 999), false),
        (Visibility(fraction: 0, milliseconds: 0), false),
    ] as [(Visibility?, Bool)])
    func viewability(_ visibility: Visibility?, _ viewable: Bool) {
        #expect(ImpressionRule.isViewable(visibility) == viewable)
    }

    @Test func verdictsInTheRulesOrder() {
        let glance = Self.impression(Visibility(fraction: 0.3, milliseconds: 2_000))
        let seen = Self.impression(Visibility(fraction: 0.8, milliseconds: 1_200))
        let silent = Self.impression(nil)
        let unserved = ImpressionRule.Facts(served: false, counted: false)
        let fresh = ImpressionRule.Facts(served: true, counted: false)
        let counted = ImpressionRule.Facts(served: true, counted: true)
        // Not served comes first, even for a glance or a repeat.
        #expect(ImpressionRule.judge(glance, unserved) == .outcome(.rejected(.adNotServed)))
        #expect(ImpressionRule.judge(seen, ImpressionRule.Facts(served: false, counted: true)) == .outcome(.rejected(.adNotServed)))
        // Then viewability: a rejected glance does not use up the session's impression.
        #expect(ImpressionRule.judge(glance, counted) == .outcome(.rejected(.notViewable)))
        #expect(ImpressionRule.judge(glance, fresh) == .outcome(.rejected(.notViewable)))
        // Then first.
        #expect(ImpressionRule.judge(seen, fresh) == .claim)
        #expect(ImpressionRule.judge(silent, fresh) == .claim)
        #expect(ImpressionRule.judge(seen, counted) == .outcome(.duplicate(.impressionAlreadyCounted)))
    }
}
