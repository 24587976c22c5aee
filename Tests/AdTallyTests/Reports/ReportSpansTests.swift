@testable import AdTally
import Testing

/// How a range is split between raw rows and rollups: the spans cover `[from, to)` exactly once, in
/// order; the hourly spans hold only whole hours before `rolled_up_to`, the daily span only whole
/// days before `days_rolled_up_to`.
@Suite(.timeLimit(.minutes(5))) struct ReportSpansTests {
    static func t(_ text: String) -> Timestamp { ReportFixture.time(text) }
    static let hour = ReportSpans.hour, day = ReportSpans.day

    /// Checks the invariants for one range, by walking the spans' bounds.
    static func check(from: Timestamp?, to: Timestamp?, rolled: Timestamp, days: Timestamp, useDays: Bool,
                      sourceLocation: SourceLocation = #_sourceLocation) -> ReportSpans {
        let s = ReportSpans(from: from, to: to, rolledUpTo: rolled, daysRolledUpTo: days, useDays: useDays)
        let bounds = [s.from, s.h1, s.d1, s.d2, s.h2, s.to]
        #expect(zip(bounds, bounds.dropFirst()).allSatisfy { $0 <= $1 }, "bounds out of order: \(bounds)", sourceLocation: sourceLocation)
        #expect(s.from == (from.map(ReportInstant.at) ?? .minusInfinity), sourceLocation: sourceLocation)
        #expect(s.to == (to.map(ReportInstant.at) ?? .infinity), sourceLocation: sourceLocation)
        // Rolled-up spans: whole hours, before rolled_up_to; days before days_rolled_up_to.
        for (lower, upper, unit, limit) in [(s.h1, s.d1, hour, rolled), (s.d2, s.h2, hour, rolled), (s.d1, s.d2, day, days)] where lower < upper {
            for bound in [lower, upper] {
                if case .at(let time) = bound { #expect(time.microsecondsSinceEpoch % unit == 0, "\(bound) not whole", sourceLocation: sourceLocation) }
            }
            #expect(upper <= .at(limit), "a rolled-up span ends after the rollups", sourceLocation: sourceLocation)
        }
        if !useDays { #expect(s.d1 == s.d2, sourceLocation: sourceLocation) }
        return s
    }

    @Test func aRangeInsideOneHourIsAllRaw() {
        let s = Self.check(from: Self.t("2026-11-29T10:15:00Z"), to: Self.t("2026-11-29T10:45:00Z"),
                           rolled: Self.t("2026-11-30T00:00:00Z"), days: Self.t("2026-11-30T00:00:00Z"), useDays: true)
        #expect(s.h1 == s.to && s.h2 == s.to)
    }

    @Test func partialHoursAtTheEdgesAreRawAndTheRestRolledUp() {
        let s = Self.check(from: Self.t("2026-11-01T10:15:00.000001Z"), to: Self.t("2026-11-20T03:00:00.5Z"),
                           rolled: Self.t("2026-11-25T00:00:00Z"), days: Self.t("2026-11-25T00:00:00Z"), useDays: true)
        #expect(s.h1 == .at(Self.t("2026-11-01T11:00:00Z")))
        #expect(s.d1 == .at(Self.t("2026-11-02T00:00:00Z")))
        #expect(s.d2 == .at(Self.t("2026-11-20T00:00:00Z")))
        #expect(s.h2 == .at(Self.t("2026-11-20T03:00:00Z")))
    }

    @Test func hoursTheRollupsHaveNotReachedAreRaw() {
        let s = Self.check(from: Self.t("2026-11-29T00:00:00Z"), to: nil,
                           rolled: Self.t("2026-11-30T13:00:00Z"), days: Self.t("2026-11-30T00:00:00Z"), useDays: true)
        #expect(s.d1 == .at(Self.t("2026-11-29T00:00:00Z")) && s.d2 == .at(Self.t("2026-11-30T00:00:00Z")))
        #expect(s.h2 == .at(Self.t("2026-11-30T13:00:00Z")))
        #expect(s.to == .infinity)
    }

    @Test func unboundedFromStartsAtTheBeginning() {
        let s = Self.check(from: nil, to: nil, rolled: Self.t("2026-11-30T13:00:00Z"), days: Self.t("2026-11-30T00:00:00Z"), useDays: true)
        #expect(s.from == .minusInfinity && s.h1 == .minusInfinity && s.d1 == .minusInfinity)
    }

    @Test func hourlyBucketsUseNoDays() {
        let s = Self.check(from: Self.t("2026-11-01T00:00:00Z"), to: Self.t("2026-11-10T00:00:00Z"),
                           rolled: Self.t("2026-11-30T00:00:00Z"), days: Self.t("2026-11-30T00:00:00Z"), useDays: false)
        #expect(s.h1 == .at(Self.t("2026-11-01T00:00:00Z")) && s.h2 == .at(Self.t("2026-11-10T00:00:00Z")))
    }

    @Test func randomRangesKeepEveryInvariant() {
        var generator = SystemRandomNumberGenerator()
        let base = Self.t("2026-11-01T00:00:00Z").microsecondsSinceEpoch
        for _ in 0..<2_000 {
            func instant() -> Timestamp? {
                Int.random(in: 0..<10, using: &generator) == 0 ? nil
                    : Timestamp(microsecondsSinceEpoch: base + Int64.random(in: 0...(30 * Self.day), using: &generator))
            }
            var from = instant(), to = instant()
            if let f = from, let t = to, f > t { (from, to) = (to, from) }
            let rolledHours = Int64.random(in: 0...(30 * 24), using: &generator)
            let rolled = Timestamp(microsecondsSinceEpoch: base + rolledHours * Self.hour)
            let days = Timestamp(microsecondsSinceEpoch: base + Int64.random(in: 0...(rolledHours / 24), using: &generator) * Self.day)
            _ = Self.check(from: from, to: to, rolled: rolled, days: days, useDays: Bool.random(using: &generator))
        }
    }

    @Test func instantsBeforeTheEpochRoundTheRightWay() {
        let before = Timestamp(microsecondsSinceEpoch: -1)
        #expect(ReportInstant.at(before).floor(Self.hour) == .at(Timestamp(microsecondsSinceEpoch: -Self.hour)))
        #expect(ReportInstant.at(before).ceiling(Self.hour) == .at(Timestamp(microsecondsSinceEpoch: 0)))
        #expect(ReportInstant.at(Timestamp(microsecondsSinceEpoch: 0)).ceiling(Self.hour) == .at(Timestamp(microsecondsSinceEpoch: 0)))
    }
}
