import AdTallyClient
import Testing

@Suite(.timeLimit(.minutes(3))) struct ViewabilityTrackerTests {
    /// One scripted scroll: visible fractions of ads at times (milliseconds), and the end of time.
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let steps: [(ad: String, fraction: Double, at: Int)]
        let until: Int
        /// The impressions the rule gives: ad, moment (ms), lowest fraction.
        let expected: [(ad: String, at: Int, fraction: Double)]
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "49% for 5 s", steps: [("a", 0.49, 0)], until: 5000, expected: []),
        Case(name: "50% for 999 ms", steps: [("a", 0.5, 0), ("a", 0, 999)], until: 5000, expected: []),
        Case(name: "50% for 1 s", steps: [("a", 0.5, 0), ("a", 0, 1000)], until: 5000, expected: [("a", 1000, 0.5)]),
        Case(name: "50% for 1 s, still on screen", steps: [("a", 0.5, 200)], until: 5000, expected: [("a", 1200, 0.5)]),
        Case(name: "broken at 600 ms and resumed at 800 ms",
             steps: [("a", 0.9, 0), ("a", 0.3, 600), ("a", 0.7, 800), ("a", 0.6, 1500)], until: 5000,
             expected: [("a", 1800, 0.6)]),
        Case(name: "scrolled past three times", steps: [
            ("a", 0.8, 0), ("a", 0, 1500),
            ("a", 0.8, 3000), ("a", 0, 4500),
            ("a", 0.8, 6000), ("a", 0, 7500),
        ], until: 9000, expected: [("a", 1000, 0.8)]),
        Case(name: "three quick passes never viewable", steps: [
            ("a", 0.9, 0), ("a", 0, 400), ("a", 0.9, 1000), ("a", 0, 1400), ("a", 0.9, 2000), ("a", 0, 2999),
        ], until: 9000, expected: []),
        Case(name: "two ads, interleaved", steps: [
            ("a", 1.0, 0), ("b", 0.55, 300), ("a", 0.4, 900), ("b", 0.51, 1000), ("a", 1.0, 1000),
        ], until: 2500, expected: [("b", 1300, 0.51), ("a", 2000, 1.0)]),
    ]

    @Test(arguments: cases)
    func impressions(_ scroll: Case) {
        var tracker = ViewabilityTracker()
        var emitted: [ViewableImpression] = []
        for step in scroll.steps {
            emitted += tracker.update(adID: step.ad, visibleFraction: step.fraction, position: 7, at: .milliseconds(step.at))
        }
        emitted += tracker.advance(to: .milliseconds(scroll.until))
        #expect(emitted.map(\.adID) == scroll.expected.map(\.ad))
        #expect(emitted.map(\.at) == scroll.expected.map { .milliseconds($0.at) })
        #expect(emitted.map(\.visibility.fraction) == scroll.expected.map(\.fraction))
        #expect(emitted.allSatisfy { $0.visibility.milliseconds == 1000 && $0.position == 7 })
    }

    /// The deadline says when to call `advance` for a still ad, and calling it then emits.
    @Test func deadlineOfAStillAd() {
        var tracker = ViewabilityTracker()
        #expect(tracker.update(adID: "a", visibleFraction: 0.7, at: .milliseconds(250)).isEmpty)
        #expect(tracker.nextDeadline == .milliseconds(1250))
        #expect(tracker.advance(to: .milliseconds(1249)).isEmpty)
        #expect(tracker.advance(to: .milliseconds(1250)).map(\.adID) == ["a"])
        #expect(tracker.nextDeadline == nil)
    }

    /// A new session may count every ad again; hiding everything breaks every run.
    @Test func sessionsAndHiding() {
        var tracker = ViewabilityTracker()
        _ = tracker.update(adID: "a", visibleFraction: 1, at: .zero)
        #expect(tracker.advance(to: .seconds(2)).count == 1)
        #expect(tracker.hasCounted("a"))
        _ = tracker.update(adID: "b", visibleFraction: 1, at: .seconds(2))
        #expect(tracker.hideAll(at: .milliseconds(2500)).isEmpty)
        #expect(tracker.advance(to: .seconds(9)).isEmpty)
        tracker.startSession()
        _ = tracker.update(adID: "a", visibleFraction: 1, at: .seconds(10))
        #expect(tracker.advance(to: .seconds(11)).map(\.adID) == ["a"])
    }
}
