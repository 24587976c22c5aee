import Postgres
import Synchronization
import Timestamps

/// A time zone's UTC offsets over a report's range, as PostgreSQL's zone database (the `tzdata` of
/// the database server) gives them, and the local hours, days and months they make. One zone
/// database decides every boundary, whichever process asks.
///
/// A bucket is a maximal run of instants with the same local key: the local date for `day`, the
/// local year and month for `month`, the local hour *and the offset* for `hour` (so that a local
/// hour that occurs twice when the clocks go back is two buckets). Its start is the first instant
/// of the run, written with the offset in force then: a local day is 23 or 25 hours long on the days
/// the clocks change, a `+05:30` zone's hours start at half past UTC hours.
struct ZoneRules: Sendable, Equatable {
    /// The instants (microseconds since the epoch) from which each offset applies, ascending; the
    /// first offset also applies before the first start.
    let starts: [Int64]
    /// Seconds east of UTC from the start of the same index on.
    let offsets: [Int64]

    static let utc = ZoneRules(starts: [Int64.min], offsets: [0])

    init(starts: [Int64], offsets: [Int64]) {
        if starts.isEmpty || starts.count != offsets.count {
            self.starts = [Int64.min]
            self.offsets = [offsets.first ?? 0]
        } else {
            self.starts = starts
            self.offsets = offsets
        }
    }

    /// The offset in force at `t`, in seconds.
    func offset(at t: Int64) -> Int64 {
        var low = 0, high = starts.count - 1
        // The last start at or before t (the first run when none is).
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= t { low = middle } else { high = middle - 1 }
        }
        return offsets[low]
    }

    static let second: Int64 = 1_000_000
    static let hour = RollupGrain.hour
    static let day = RollupGrain.day

    /// The local key of instant `t` for `unit`: two instants are in one bucket when their keys are
    /// equal and no instant between them has another key.
    func key(_ unit: BucketUnit, _ t: Int64) -> Int64 {
        let offset = offset(at: t)
        let local = t + offset * Self.second
        switch unit {
        case .day:
            return CivilDate.floorDivide(local, Self.day).quotient
        case .hour:
            // The offset is part of the key: a repeated local hour is two buckets.
            return CivilDate.floorDivide(local, Self.hour).quotient &* 200_000 &+ offset
        case .month:
            let date = CivilDate(daysSinceEpoch: CivilDate.floorDivide(local, Self.day).quotient)
            return date.year * 12 + date.month
        }
    }

    /// The starts of the buckets of `unit` that meet `[lo, hi)`, ascending, and the end of the last
    /// one: the first start is at or before `lo`, the end after `hi - 1`. Empty when `lo >= hi`.
    func buckets(_ unit: BucketUnit, from lo: Int64, to hi: Int64) -> (starts: [Int64], end: Int64) {
        guard lo < hi else { return ([], hi) }
        let margin: Int64 = unit == .month ? 33 * Self.day : 2 * Self.day
        let scanFrom = lo - margin, scanTo = hi + margin
        var candidates: [Int64] = []
        for index in starts.indices {
            let runStart = max(starts[index], scanFrom)
            let runEnd = min(index + 1 < starts.count ? starts[index + 1] : Int64.max, scanTo)
            guard runStart < runEnd else { continue }
            if starts[index] >= scanFrom { candidates.append(starts[index]) }
            let shift = offsets[index] * Self.second
            switch unit {
            case .hour, .day:
                let step = unit == .hour ? Self.hour : Self.day
                // Local multiples of the step, back in UTC: t = k * step - offset.
                var t = (CivilDate.floorDivide(runStart + shift, step).quotient + 1) * step - shift
                if t - step >= runStart { t -= step }
                while t < runEnd {
                    if t >= runStart { candidates.append(t) }
                    t += step
                }
            case .month:
                var date = CivilDate(daysSinceEpoch: CivilDate.floorDivide(runStart + shift, Self.day).quotient)
                date = CivilDate(year: date.year, month: date.month, day: 1)
                while true {
                    let t = date.daysSinceEpoch * Self.day - shift
                    if t >= runEnd { break }
                    if t >= runStart { candidates.append(t) }
                    date = date.startOfNextMonth
                }
            }
        }
        candidates.sort()
        var boundaries: [Int64] = []
        var previous: Int64?
        for t in candidates where t != previous {
            previous = t
            if key(unit, t) != key(unit, t - 1) { boundaries.append(t) }
        }
        // The bucket holding lo starts at the last boundary at or before it.
        guard let first = boundaries.lastIndex(where: { $0 <= lo }) else {
            return ([lo], boundaries.first { $0 > lo } ?? hi)
        }
        var result = [boundaries[first]]
        var end = hi
        var index = first + 1
        while index < boundaries.count {
            if boundaries[index] >= hi {
                end = boundaries[index]
                break
            }
            result.append(boundaries[index])
            index += 1
        }
        if index >= boundaries.count { end = max(hi, scanTo) }
        return (result, end)
    }

    /// `t` as RFC 3339 with the offset in force then (`Z` for UTC when `utcAsZ`), milliseconds.
    func rfc3339(_ t: Int64, utcAsZ: Bool) -> String {
        let offset = offset(at: t)
        if utcAsZ && offset == 0 { return Timestamp(microsecondsSinceEpoch: t).rfc3339 }
        let local = Timestamp(microsecondsSinceEpoch: t + offset * Self.second).rfc3339
        // "...sss" plus "Z" -> "...sss+hh:mm".
        let magnitude = abs(offset)
        let hours = magnitude / 3_600, minutes = (magnitude % 3_600) / 60
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return String(local.dropLast()) + (offset < 0 ? "-" : "+") + two(hours) + ":" + two(minutes)
    }
}

/// The unit of a listing's buckets (besides `total`, which has none).
enum BucketUnit: Sendable {
    case hour, day, month
}

/// The zone names reports accept: those of PostgreSQL's zone database (`pg_timezone_names`, the
/// IANA names of the `tzdata` it reads), less its `posix/` copies and the server-local aliases.
/// Read once per process, on the first report that names a zone.
final class KnownZones: Sendable {
    private let names = Mutex<Set<String>?>(nil)

    /// Whether `name` is a zone; nil when the names were not read yet.
    func contains(_ zone: ZoneName) -> Bool? {
        if zone.isUTC { return true }
        return names.withLock { $0?.contains(zone.name) }
    }

    /// Reads the names if they were not read yet.
    func load(on connection: PostgresConnection) throws {
        if names.withLock({ $0 != nil }) { return }
        let loaded = try connection.query("""
            SELECT name FROM pg_timezone_names
            WHERE name NOT LIKE 'posix/%' AND name NOT IN ('localtime', 'posixrules', 'Factory')
            """).rows.map { try $0.decode(String.self, at: 0) }
        names.withLock { $0 = Set(loaded) }
    }

    /// The statement that reads `zone`'s offsets over `[lower, upper]` (microseconds; the bounds
    /// are widened by 35 days, so that the month holding `lower` and the one holding `upper` are
    /// covered whole: the first bucket's start, before `lower`, is written with the offset in force
    /// then, which may differ from the one at `lower`): one probe a day, and where two probes differ, the first quarter
    /// hour of that day with the new offset (every offset in force today changes on a quarter
    /// hour; at most one change a day). The probes are at UTC midnights, so that the search for a
    /// change steps over quarter hours: from a bound's own time of day (a `from` of 00:19:44) it
    /// stepped over 07:04:44 and put New York's 2026 spring change there, not at 07:00, which split
    /// that hour's bucket in two.
    static func rulesQuery(zone: ZoneName, lower: Int64, upper: Int64) -> PostgresQuery {
        let firstProbe = CivilDate.floorDivide(lower / 1_000_000 - 35 * 86_400, 86_400).quotient * 86_400
        return """
        WITH p AS (
            SELECT g AS t, extract(epoch FROM (g AT TIME ZONE \(zone.name)) - (g AT TIME ZONE 'UTC'))::bigint AS off
            FROM generate_series(to_timestamp(\(firstProbe)::double precision),
                                 to_timestamp(\(upper / 1_000_000 + 35 * 86_400)::double precision), interval '1 day') AS g
        ), c AS (
            SELECT t, off, lead(off) OVER (ORDER BY t) AS next FROM p
        )
        SELECT s, off FROM (
            SELECT (extract(epoch FROM min(t)) * 1000000)::bigint AS s, (array_agg(off ORDER BY t))[1] AS off FROM p
            UNION ALL
            SELECT (extract(epoch FROM (SELECT min(q) FROM generate_series(c.t, c.t + interval '1 day', interval '15 minutes') AS q
                                        WHERE extract(epoch FROM (q AT TIME ZONE \(zone.name)) - (q AT TIME ZONE 'UTC'))::bigint = c.next))
                    * 1000000)::bigint, c.next
            FROM c WHERE c.next IS NOT NULL AND c.next <> c.off
        ) r WHERE s IS NOT NULL ORDER BY s
        """
    }

    /// The rules a `rulesQuery` answered.
    static func rules(from result: PostgresResult) throws -> ZoneRules {
        var starts: [Int64] = [], offsets: [Int64] = []
        for row in result.rows {
            starts.append(try row.decode(Int64.self, at: 0))
            offsets.append(try row.decode(Int64.self, at: 1))
        }
        if !starts.isEmpty { starts[0] = Int64.min }
        return ZoneRules(starts: starts, offsets: offsets)
    }
}
