import Postgres
import Timestamps

/// One piece of a report's plan: the rows of one source in `[lo, hi)`, counted into one bucket, or
/// into buckets of `step` microseconds from `bucket` (`date_bin`), or into none (`total`).
struct ReportSpan: Sendable, Equatable {
    enum Source: Hashable, Sendable {
        /// Raw events.
        case raw
        /// `ad_quarter_counts`.
        case quarters
        /// `ad_day_counts` of one phase (minutes after UTC midnight).
        case days(Int64)
        /// `ad_hourly_counts` (before 0010).
        case legacyHours
        /// `ad_daily_counts` (before 0010).
        case legacyDays
    }

    var source: Source
    var lo: Int64
    var hi: Int64
    /// The bucket's start, or the origin of the `step` bins; nil for `total`.
    var bucket: Int64?
    /// When set, a row's bucket is `date_bin(step, its time, bucket)`.
    var step: Int64?
}

/// How a report's range `[from, to)` is read, bucket by bucket (ARCHITECTURE.md, "History"): the
/// coarsest rollup rows that lie wholly inside the bucket and before `folded_to`, finer ones at its
/// edges, and raw events only for what no rollup row fits: the microseconds before the first and
/// after the last whole quarter hour, and what was received since the last fold. Every instant of
/// the range is in exactly one span, so every count equals the raw count, for every bound and zone:
///
///     [from ─ raw ─ q1) [q1 ─ quarters ─ d1) [d1 ─ days of one phase ─ d2) [d2 ─ quarters ─ q2) [q2 ─ raw ─ to)
///
/// with `q2` no later than `folded_to` (the last quarter's row may be partial, exactly up to it) and
/// the days those of the phase that fits the most whole days (UTC's for UTC days, 18:30 UTC's for
/// Kolkata's). Before `quarters_from` the same with whole UTC hours and days of before 0010.
struct ReportSpans: Sendable, Equatable {
    static let quarter = RollupGrain.quarter
    static let hour = RollupGrain.hour
    static let day = RollupGrain.day
    /// The end of an unbounded range with no buckets: 9999-12-31T23:59:59.999999Z.
    static let endOfTime: Int64 = 253_402_300_799_999_999

    /// The pieces, merged where one row maps to its bucket the same way throughout.
    private(set) var spans: [ReportSpan] = []
    /// Each bucket's start and end (unclipped), in order; empty for `total`.
    private(set) var buckets: [(start: Int64, end: Int64)] = []

    /// Where a bound or a bucket edge falls inside an hour whose raw rows are gone (before
    /// `quarters_from` once the legacy re-fold ended).
    struct Unanswerable: Error, Equatable {
        /// The instant to blame.
        let at: Int64
        /// Where the hourly-only history ends.
        let quartersFrom: Int64
    }

    static func == (lhs: ReportSpans, rhs: ReportSpans) -> Bool {
        lhs.spans == rhs.spans && lhs.buckets.map(\.start) == rhs.buckets.map(\.start) && lhs.buckets.map(\.end) == rhs.buckets.map(\.end)
    }

    /// The plan of `[from, to)` (nil: unbounded) in `unit`'s buckets of `zone` (nil: one total).
    init(from: Int64?, to: Int64?, unit: BucketUnit?, zone: ZoneRules, state: RollupState) throws(Unanswerable) {
        let lo = from ?? min(state.lowerExtent, to ?? state.lowerExtent)
        let hi = to ?? (unit == nil ? Self.endOfTime : max(state.upperExtent, lo))
        guard lo < hi else { return }
        var builder = Builder(state: state, unit: unit)
        if let unit {
            let (starts, end) = zone.buckets(unit, from: lo, to: hi)
            for (index, start) in starts.enumerated() {
                let bucketEnd = index + 1 < starts.count ? starts[index + 1] : end
                buckets.append((start, bucketEnd))
                try builder.cover(max(start, lo), min(bucketEnd, hi), bucket: start, bucketLength: bucketEnd - start)
            }
        } else {
            try builder.cover(lo, hi, bucket: nil, bucketLength: 0)
        }
        spans = builder.spans
    }

    /// The end of the bucket that starts at `start`, if it is one of this plan's.
    func bucketEnd(of start: Int64) -> Int64? {
        var low = 0, high = buckets.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if buckets[middle].start == start { return buckets[middle].end }
            if buckets[middle].start < start { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    /// The spans of one source, in order.
    func spans(of source: ReportSpan.Source) -> [ReportSpan] { spans.filter { $0.source == source } }

    /// Collects the pieces of each bucket and merges them as they come.
    struct Builder {
        let state: RollupState
        let unit: BucketUnit?
        var spans: [ReportSpan] = []
        /// The index of the last span of each source, to merge into.
        var last: [ReportSpan.Source: Int] = [:]

        init(state: RollupState, unit: BucketUnit?) {
            self.state = state
            self.unit = unit
        }

        static func floor(_ t: Int64, _ unit: Int64, phase: Int64 = 0) -> Int64 { RollupGrain.floor(t, unit, phase: phase) }

        static func ceiling(_ t: Int64, _ unit: Int64, phase: Int64 = 0) -> Int64 { RollupGrain.ceiling(t, unit, phase: phase) }

        /// `[a, b)` of one bucket (or of the total).
        mutating func cover(_ a: Int64, _ b: Int64, bucket: Int64?, bucketLength: Int64) throws(Unanswerable) {
            guard a < b else { return }
            let quartersFrom = state.quartersFrom ?? Int64.min
            let folded = max(state.foldedTo, quartersFrom)
            if a < quartersFrom { try legacy(a, min(b, quartersFrom), bucket, bucketLength) }
            let qa = max(a, quartersFrom), qb = min(b, folded)
            if qa < qb { quarters(qa, qb, endsAtFold: qb == folded, bucket, bucketLength) }
            let ra = max(a, folded)
            if ra < b { add(.raw, ra, b, bucket, bucketLength) }
        }

        /// The quarter-hour history: `b` is either a quarter hour or the fold position (whose
        /// quarter's row holds exactly what came before it).
        mutating func quarters(_ a: Int64, _ b: Int64, endsAtFold: Bool, _ bucket: Int64?, _ length: Int64) {
            let first = Self.ceiling(a, ReportSpans.quarter)
            let end = endsAtFold ? b : Self.floor(b, ReportSpans.quarter)
            guard first < end else {
                add(.raw, a, b, bucket, length)
                return
            }
            if a < first { add(.raw, a, first, bucket, length) }
            // The phase whose whole days fill most of [first, end): its days, quarters around them.
            var best: (phase: Int64, d1: Int64, d2: Int64)?
            let dayEnd = Self.floor(end, ReportSpans.quarter)
            for phase in state.phases {
                let offset = phase.minutes * 60 * 1_000_000
                let d1 = max(Self.ceiling(first, ReportSpans.day, phase: offset), phase.daysFrom)
                let d2 = min(Self.floor(dayEnd, ReportSpans.day, phase: offset), phase.daysTo)
                if d1 < d2, d2 - d1 > (best.map { $0.d2 - $0.d1 } ?? 0) { best = (phase.minutes, d1, d2) }
            }
            if let best {
                if first < best.d1 { add(.quarters, first, best.d1, bucket, length) }
                add(.days(best.phase), best.d1, best.d2, bucket, length)
                if best.d2 < end { add(.quarters, best.d2, end, bucket, length) }
            } else {
                add(.quarters, first, end, bucket, length)
            }
            if end < b { add(.raw, end, b, bucket, length) }
        }

        /// The history before 0010: whole UTC hours (and days) from its rollups, the rest raw while
        /// the raw rows are kept.
        mutating func legacy(_ a: Int64, _ b: Int64, _ bucket: Int64?, _ length: Int64) throws(Unanswerable) {
            let first = Self.ceiling(a, ReportSpans.hour)
            let end = Self.floor(b, ReportSpans.hour)
            guard first < end else {
                try legacyRaw(a, b, bucket, length)
                return
            }
            try legacyRaw(a, first, bucket, length)
            let d1 = Self.ceiling(first, ReportSpans.day)
            let d2 = min(Self.floor(end, ReportSpans.day), Self.floor(min(state.legacyDaysTo, state.quartersFrom ?? Int64.min), ReportSpans.day))
            if d1 < d2 {
                if first < d1 { add(.legacyHours, first, d1, bucket, length) }
                add(.legacyDays, d1, d2, bucket, length)
                if d2 < end { add(.legacyHours, d2, end, bucket, length) }
            } else {
                add(.legacyHours, first, end, bucket, length)
            }
            try legacyRaw(end, b, bucket, length)
        }

        mutating func legacyRaw(_ a: Int64, _ b: Int64, _ bucket: Int64?, _ length: Int64) throws(Unanswerable) {
            guard a < b else { return }
            guard state.refining else { throw Unanswerable(at: a, quartersFrom: state.quartersFrom ?? Int64.min) }
            add(.raw, a, b, bucket, length)
        }

        /// Adds a piece, merged into the source's last span when both map rows to buckets the
        /// same way: one bucket for both, or bins of one step and origin.
        mutating func add(_ source: ReportSpan.Source, _ lo: Int64, _ hi: Int64, _ bucket: Int64?, _ length: Int64) {
            guard lo < hi else { return }
            var span = ReportSpan(source: source, lo: lo, hi: hi, bucket: bucket, step: nil)
            // A piece that is its whole bucket, of a fixed length (an hour; a day of 24 hours), maps
            // each row by date_bin: consecutive ones merge into one span.
            if let bucket, lo == bucket, hi - lo == length,
               (unit == .hour && length == ReportSpans.hour) || (unit == .day && length == ReportSpans.day) {
                span.step = length
            }
            if let index = last[source] {
                let previous = spans[index]
                let sameBucket = previous.step == nil && span.step == nil && previous.bucket == span.bucket
                var sameBins = false
                if let step = span.step, previous.step == step, let origin = previous.bucket, let next = span.bucket {
                    sameBins = (next - origin) % step == 0
                }
                if previous.hi == lo, sameBucket || sameBins {
                    spans[index].hi = hi
                    return
                }
            }
            spans.append(span)
            last[source] = spans.count - 1
        }
    }
}
