@testable import AdTally
import Testing
import Timestamps

/// How a range is split between raw rows and rollups, bucket by bucket: the spans cover each
/// bucket's part of `[from, to)` exactly once; quarter spans hold only whole quarters before
/// `folded_to` (the last possibly partial, ending exactly there), day spans only whole days of a
/// kept phase, legacy spans whole hours before `quarters_from`. And the zone rules' local buckets:
/// 23- and 25-hour days, the repeated hour, half-hour zones. No database: the rules are written out.
@Suite(.timeLimit(.minutes(3))) struct ReportSpansTests {
    static func t(_ text: String) -> Int64 { ReportFixture.time(text).microsecondsSinceEpoch }
    static let hour = ReportSpans.hour, day = ReportSpans.day, quarter = ReportSpans.quarter

    /// America/New_York around 2026's changes: EST (-5) until 2026-03-08T07:00Z, EDT (-4) until
    /// 2026-11-01T06:00Z, then EST.
    static let newYork = ZoneRules(starts: [Int64.min, t("2026-03-08T07:00:00Z"), t("2026-11-01T06:00:00Z")],
                                   offsets: [-5 * 3_600, -4 * 3_600, -5 * 3_600])
    static let kolkata = ZoneRules(starts: [Int64.min], offsets: [19_800])
    /// Australia/Lord_Howe: +11 until 2026-04-04T15:00Z (02:00 local back to 01:30), +10:30 until
    /// 2026-10-03T15:30Z (02:00 forward to 02:30), then +11.
    static let lordHowe = ZoneRules(starts: [Int64.min, t("2026-04-04T15:00:00Z"), t("2026-10-03T15:30:00Z")],
                                    offsets: [39_600, 37_800, 39_600])

    static func state(folded: String, quartersFrom: String? = nil, phases: [(Int64, String, String)] = [(0, "2026-01-01T00:00:00Z", "2026-11-20T00:00:00Z")],
                      refining: Bool = true) -> RollupState {
        RollupState(foldedTo: t(folded), quartersFrom: quartersFrom.map(t), legacyDaysTo: quartersFrom.map(t) ?? Int64.min, refining: refining,
                    phases: phases.map { RollupState.Phase(minutes: $0.0, daysFrom: t($0.1), daysTo: t($0.2)) },
                    lowerExtent: t("2026-01-01T00:00:00Z"), upperExtent: t("2026-12-31T00:00:00Z"))
    }

    /// Checks the invariants and returns the plan.
    @discardableResult
    static func check(_ from: String?, _ to: String?, unit: BucketUnit?, zone: ZoneRules = .utc, state: RollupState,
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> ReportSpans {
        let plan = try ReportSpans(from: from.map(t), to: to.map(t), unit: unit, zone: zone, state: state)
        // Every instant of the range in exactly one span: walk each bucket's spans in order.
        var covered: [(Int64, Int64, Int64?)] = []
        for span in plan.spans {
            switch span.source {
            case .quarters:
                #expect(span.lo % quarter == 0, "quarter span starts off the grid", sourceLocation: sourceLocation)
                #expect(span.hi % quarter == 0 || span.hi == state.foldedTo, "quarter span ends off the grid", sourceLocation: sourceLocation)
                #expect(span.hi <= state.foldedTo && span.lo >= (state.quartersFrom ?? Int64.min), sourceLocation: sourceLocation)
            case .days(let phase):
                let p = state.phases.first { $0.minutes == phase }
                #expect(p != nil && span.lo >= p!.daysFrom && span.hi <= p!.daysTo, "day span outside its phase", sourceLocation: sourceLocation)
                #expect((span.lo - phase * 60_000_000) % day == 0 && (span.hi - span.lo) % day == 0, sourceLocation: sourceLocation)
            case .legacyHours, .legacyDays:
                #expect(span.lo % hour == 0 && span.hi % hour == 0 && span.hi <= (state.quartersFrom ?? Int64.min), sourceLocation: sourceLocation)
            case .raw:
                break
            }
            if let step = span.step {
                // A binned span: each step is one bucket.
                var at = span.lo
                while at < span.hi {
                    covered.append((at, min(at + step, span.hi), at))
                    at += step
                }
            } else {
                covered.append((span.lo, span.hi, span.bucket))
            }
        }
        covered.sort { ($0.2 ?? 0, $0.0) < ($1.2 ?? 0, $1.0) }
        let lo = from.map(t) ?? state.lowerExtent
        let hi = to.map(t) ?? (unit == nil ? ReportSpans.endOfTime : state.upperExtent)
        if unit == nil {
            var at = lo
            for piece in covered {
                #expect(piece.0 == at, "a gap or overlap at \(piece.0) (expected \(at))", sourceLocation: sourceLocation)
                at = piece.1
            }
            #expect(at == hi || lo >= hi, sourceLocation: sourceLocation)
        } else {
            for bucket in plan.buckets {
                var at = max(bucket.start, lo)
                for piece in covered where piece.2 == bucket.start {
                    #expect(piece.0 == at, "bucket \(bucket.start): a gap or overlap at \(piece.0)", sourceLocation: sourceLocation)
                    at = piece.1
                }
                #expect(at == min(bucket.end, hi), "bucket \(bucket.start) covered to \(at)", sourceLocation: sourceLocation)
            }
        }
        return plan
    }

    @Test func aTotalReadsDaysQuartersAndRawEdges() throws {
        let s = Self.state(folded: "2026-11-25T10:07:13Z")
        let plan = try Self.check("2026-11-01T10:15:00.000001Z", "2026-11-24T03:00:00.5Z", unit: nil, state: s)
        #expect(plan.spans.first { $0.source == .days(0) } == ReportSpan(source: .days(0), lo: Self.t("2026-11-02T00:00:00Z"),
                                                                          hi: Self.t("2026-11-20T00:00:00Z"), bucket: nil, step: nil))
        #expect(plan.spans.contains { $0.source == .raw && $0.hi == Self.t("2026-11-01T10:30:00Z") })
        // Past the fold, raw; the quarters reach the fold's partial quarter exactly.
        let open = try Self.check("2026-11-25T00:00:00Z", nil, unit: nil, state: s)
        #expect(open.spans.contains { $0.source == .quarters && $0.hi == s.foldedTo })
        #expect(open.spans.contains { $0.source == .raw && $0.lo == s.foldedTo && $0.hi == ReportSpans.endOfTime })
    }

    @Test func aRangeInsideTheFoldsLastQuarterIsRaw() throws {
        let s = Self.state(folded: "2026-11-25T10:07:13Z")
        let plan = try Self.check("2026-11-25T10:01:00Z", "2026-11-25T10:20:00Z", unit: nil, state: s)
        #expect(plan.spans.allSatisfy { $0.source == .raw })
    }

    @Test func localDaysOfKolkataUseTheirPhase() throws {
        let s = Self.state(folded: "2026-11-25T00:00:00Z", phases: [(0, "2026-01-01T00:00:00Z", "2026-11-20T00:00:00Z"),
                                                                   (1_110, "2026-10-31T18:30:00Z", "2026-11-19T18:30:00Z")])
        let plan = try Self.check("2026-11-01T00:00:00Z", "2026-11-21T00:00:00Z", unit: .day, zone: Self.kolkata, state: s)
        #expect(plan.buckets.first?.start == Self.t("2026-10-31T18:30:00Z"))
        #expect(plan.spans.contains { $0.source == .days(1_110) && $0.step == Self.day })
        #expect(!plan.spans.contains { $0.source == .days(0) })
        // Whole local days of one phase: every row is its own bucket.
        let whole = try Self.check("2026-11-01T18:30:00Z", "2026-11-10T18:30:00Z", unit: .day, zone: Self.kolkata, state: s)
        #expect(ReportStore.rowsAreBuckets(whole, granularity: .day))
    }

    @Test func newYorksChangesMakeDaysOf23And25Hours() throws {
        let rules = Self.newYork
        let (march, _) = rules.buckets(.day, from: Self.t("2026-03-07T12:00:00Z"), to: Self.t("2026-03-10T12:00:00Z"))
        #expect(march == [Self.t("2026-03-07T05:00:00Z"), Self.t("2026-03-08T05:00:00Z"), Self.t("2026-03-09T04:00:00Z"),
                          Self.t("2026-03-10T04:00:00Z")])
        let (november, _) = rules.buckets(.day, from: Self.t("2026-10-31T12:00:00Z"), to: Self.t("2026-11-02T12:00:00Z"))
        #expect(november == [Self.t("2026-10-31T04:00:00Z"), Self.t("2026-11-01T04:00:00Z"), Self.t("2026-11-02T05:00:00Z")])
        // The repeated hour is two buckets, 01:00-04:00 and 01:00-05:00.
        let (hours, _) = rules.buckets(.hour, from: Self.t("2026-11-01T04:30:00Z"), to: Self.t("2026-11-01T07:30:00Z"))
        #expect(hours == [Self.t("2026-11-01T04:00:00Z"), Self.t("2026-11-01T05:00:00Z"), Self.t("2026-11-01T06:00:00Z"),
                          Self.t("2026-11-01T07:00:00Z")])
        #expect(rules.rfc3339(Self.t("2026-11-01T05:00:00Z"), utcAsZ: true) == "2026-11-01T01:00:00.000-04:00")
        #expect(rules.rfc3339(Self.t("2026-11-01T06:00:00Z"), utcAsZ: true) == "2026-11-01T01:00:00.000-05:00")
        // A month crossing the change, and the plan over it.
        let (months, end) = rules.buckets(.month, from: Self.t("2026-10-15T00:00:00Z"), to: Self.t("2026-11-15T00:00:00Z"))
        #expect(months == [Self.t("2026-10-01T04:00:00Z"), Self.t("2026-11-01T04:00:00Z")])
        #expect(end == Self.t("2026-12-01T05:00:00Z"))
        let s = Self.state(folded: "2026-11-25T00:00:00Z", phases: [(0, "2026-01-01T00:00:00Z", "2026-11-24T00:00:00Z"),
                                                                   (240, "2026-01-01T04:00:00Z", "2026-11-24T04:00:00Z"),
                                                                   (300, "2026-01-01T05:00:00Z", "2026-11-24T05:00:00Z")])
        try Self.check("2026-10-25T04:00:00Z", "2026-11-10T05:00:00Z", unit: .day, zone: rules, state: s)
        try Self.check("2026-10-25T04:00:00Z", "2026-11-10T05:00:00Z", unit: .month, zone: rules, state: s)
        try Self.check("2026-10-31T04:17:00.000003Z", "2026-11-02T05:00:00Z", unit: .hour, zone: rules, state: s)
    }

    @Test func lordHowesHalfHourChange() throws {
        let rules = Self.lordHowe
        // Back: 01:30-02:00 occurs twice; its second pass is a bucket of its own, from 15:00Z.
        let (hours, _) = rules.buckets(.hour, from: Self.t("2026-04-04T13:30:00Z"), to: Self.t("2026-04-04T16:00:00Z"))
        #expect(hours == [Self.t("2026-04-04T13:00:00Z"), Self.t("2026-04-04T14:00:00Z"), Self.t("2026-04-04T15:00:00Z"),
                          Self.t("2026-04-04T15:30:00Z")])
        #expect(rules.rfc3339(Self.t("2026-04-04T15:00:00Z"), utcAsZ: true) == "2026-04-05T01:30:00.000+10:30")
        // Forward (Sunday 4 October, 02:00 to 02:30): that local day is 23.5 hours.
        let (days, end) = rules.buckets(.day, from: Self.t("2026-10-03T20:00:00Z"), to: Self.t("2026-10-04T00:00:00Z"))
        #expect(days == [Self.t("2026-10-03T13:30:00Z")])
        #expect(end == Self.t("2026-10-04T13:00:00Z"))
        let s = Self.state(folded: "2026-11-25T00:00:00Z")
        try Self.check("2026-04-03T00:00:00Z", "2026-04-06T00:00:00Z", unit: .hour, zone: rules, state: s)
        try Self.check("2026-09-30T00:00:00Z", "2026-10-06T00:00:00Z", unit: .day, zone: rules, state: s)
    }

    @Test func theHourlyHistoryIsReadByWholeHoursAndRefusedWhenSplitWithoutRawRows() throws {
        var s = Self.state(folded: "2026-11-25T00:00:00Z", quartersFrom: "2026-11-10T00:00:00Z")
        let plan = try Self.check("2026-11-01T10:15:00Z", "2026-11-20T00:00:00Z", unit: nil, state: s)
        #expect(plan.spans.contains { $0.source == .legacyDays })
        #expect(plan.spans.contains { $0.source == .legacyHours })
        #expect(plan.spans.contains { $0.source == .raw && $0.lo == Self.t("2026-11-01T10:15:00Z") })
        s.refining = false
        #expect(throws: ReportSpans.Unanswerable.self) { try ReportSpans(from: Self.t("2026-11-01T10:15:00Z"), to: nil, unit: nil, zone: .utc, state: s) }
        #expect(throws: ReportSpans.Unanswerable.self) {
            try ReportSpans(from: Self.t("2026-11-01T00:00:00Z"), to: Self.t("2026-11-05T00:00:00Z"), unit: .day, zone: Self.kolkata, state: s)
        }
        try Self.check("2026-11-01T10:00:00Z", nil, unit: .day, state: s)
        try Self.check("2026-11-01T10:00:00Z", "2026-11-12T00:00:00Z", unit: .hour, zone: Self.newYork, state: s)
    }

    @Test func randomRangesCoverEveryInstantOnce() throws {
        var generator = SystemRandomNumberGenerator()
        let base = Self.t("2026-10-20T00:00:00Z")
        for round in 0..<300 {
            let folded = base + Int64.random(in: 0...(20 * Self.day), using: &generator)
            let quartersFrom: Int64? = round % 3 == 0 ? nil : base + Int64.random(in: 0...(10 * Self.day), using: &generator) / Self.hour * Self.hour
            let phases = [(Int64(0)), 240, 300, 1_110, 345].filter { _ in Bool.random(using: &generator) }.map { minutes -> RollupState.Phase in
                let offset = minutes * 60_000_000
                let from = ReportSpans.Builder.ceiling(quartersFrom ?? base, Self.day, phase: offset) + Int64.random(in: 0...3, using: &generator) * Self.day
                let to = max(from, ReportSpans.Builder.floor(folded, Self.day, phase: offset))
                return RollupState.Phase(minutes: minutes, daysFrom: from, daysTo: to)
            }
            let state = RollupState(foldedTo: max(folded, quartersFrom ?? folded), quartersFrom: quartersFrom, legacyDaysTo: quartersFrom ?? Int64.min,
                                    refining: true, phases: phases, lowerExtent: base - Self.day, upperExtent: folded + Self.day)
            var bounds = [base + Int64.random(in: -Self.day...(22 * Self.day), using: &generator),
                          base + Int64.random(in: -Self.day...(22 * Self.day), using: &generator)].sorted()
            if round % 4 == 0 { bounds = bounds.map { $0 / Self.quarter * Self.quarter } }
            let zone = [ZoneRules.utc, Self.newYork, Self.kolkata, Self.lordHowe][round % 4]
            let unit: BucketUnit? = [nil, .day, .hour, .month][(round / 4) % 4]
            let from = Timestamp(microsecondsSinceEpoch: bounds[0]).rfc3339Microseconds
            let to = Timestamp(microsecondsSinceEpoch: bounds[1]).rfc3339Microseconds
            try Self.check(from, to, unit: unit, zone: zone, state: state)
        }
    }
}
