/// RFC 3339 parsing and the contract's output form.
///
/// Accepted: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, where
/// - the separator is `T` or `t` (RFC 3339 §5.6 allows lowercase); a space (allowed by the RFC's
///   note only "by mutual agreement") is refused, as is a missing offset (a local time is ambiguous);
/// - `Z` or `z`; an offset's hours are 00–23 and minutes 00–59; `-00:00` is read as UTC;
/// - any number of fraction digits (at least one after the dot); digits past microseconds are
///   truncated, never rounded, so a time is never moved into the next second or day;
/// - month, day (leap years included), hour 00–23, minute 00–59, second 00–59 are range-checked;
/// - a leap second `:60` is accepted (RFC 3339 allows it) and clamped to `:59.999999` of the same
///   minute: AdTally has no leap-second table, the clamp keeps order, and rejecting a valid RFC 3339
///   time would refuse events from a correct client;
/// - the instant must lie within years 0000–9999 in UTC, so that every parsed timestamp can be
///   written back in the same four-digit form.
extension Timestamp {
    /// The earliest instant accepted: 0000-01-01T00:00:00Z.
    static let earliestMicroseconds: Int64 = -62_167_219_200 * microsecondsPerSecond
    /// The latest instant accepted: 9999-12-31T23:59:59.999999Z.
    static let latestMicroseconds: Int64 = 253_402_300_800 * microsecondsPerSecond - 1

    /// Parses an RFC 3339 timestamp with a mandatory offset; `nil` when out of form or out of range.
    public init?(rfc3339 text: String) {
        var text = text
        let parsed: Int64? = text.withUTF8 { Timestamp.parseMicroseconds($0) }
        guard let parsed else { return nil }
        self.init(microsecondsSinceEpoch: parsed)
    }

    private static func parseMicroseconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        var index = 0

        func digits(_ count: Int) -> Int64? {
            guard index + count <= bytes.count else { return nil }
            var value: Int64 = 0
            for _ in 0..<count {
                let byte = bytes[index]
                guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
                index += 1
            }
            return value
        }
        func expect(_ byte: UInt8, or alternative: UInt8? = nil) -> Bool {
            guard index < bytes.count, bytes[index] == byte || bytes[index] == alternative else { return false }
            index += 1
            return true
        }

        guard let year = digits(4), expect(UInt8(ascii: "-")),
              let month = digits(2), expect(UInt8(ascii: "-")),
              let day = digits(2), expect(UInt8(ascii: "T"), or: UInt8(ascii: "t")),
              let hour = digits(2), expect(UInt8(ascii: ":")),
              let minute = digits(2), expect(UInt8(ascii: ":")),
              var second = digits(2)
        else { return nil }

        var microseconds: Int64 = 0
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            var count = 0
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                if count < 6 { microseconds = microseconds * 10 + Int64(bytes[index] - UInt8(ascii: "0")) }
                count += 1
                index += 1
            }
            guard count >= 1 else { return nil }
            for _ in min(count, 6)..<6 { microseconds *= 10 }
        }

        var offsetSeconds: Int64 = 0
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let offsetHour = digits(2), expect(UInt8(ascii: ":")), let offsetMinute = digits(2),
                  offsetHour <= 23, offsetMinute <= 59
            else { return nil }
            offsetSeconds = sign * (offsetHour * 3600 + offsetMinute * 60)
        default:
            return nil
        }
        guard index == bytes.count else { return nil }

        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
              hour <= 23, minute <= 59, second <= 60
        else { return nil }
        if second == 60 {
            second = 59
            microseconds = 999_999
        }

        let days = daysFromCivil(year: year, month: month, day: day)
        let localSeconds = days * 86_400 + hour * 3600 + minute * 60 + second
        let total = (localSeconds - offsetSeconds) * microsecondsPerSecond + microseconds
        guard total >= earliestMicroseconds && total <= latestMicroseconds else { return nil }
        return total
    }

    static func isLeapYear(_ year: Int64) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (Hinnant's `civil_from_days`).
    static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// The contract's output form: UTC, `Z`, millisecond precision (`2026-11-29T13:47:00.250Z`),
    /// truncated toward the earlier instant (microseconds 999,999 give `.999`, never the next second).
    /// Years outside 0000–9999 (only reachable through `init(microsecondsSinceEpoch:)`) are written
    /// with as many digits as they need and a `-` sign before year zero.
    public var rfc3339: String {
        let micros = microsecondsSinceEpoch
        // Floor division so instants before 1970 format correctly. Int64.min / 86_400_000_000 is safe.
        var days = micros / 86_400_000_000
        var microsOfDay = micros % 86_400_000_000
        if microsOfDay < 0 {
            days -= 1
            microsOfDay += 86_400_000_000
        }
        let (year, month, day) = Timestamp.civilFromDays(days)
        let millisOfDay = microsOfDay / 1000
        let hour = millisOfDay / 3_600_000
        let minute = millisOfDay / 60_000 % 60
        let second = millisOfDay / 1000 % 60
        let millisecond = millisOfDay % 1000

        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        func append(_ value: Int64, width: Int) {
            var digits: [UInt8] = []
            var rest = value
            repeat {
                digits.append(UInt8(ascii: "0") + UInt8(rest % 10))
                rest /= 10
            } while rest > 0
            while digits.count < width { digits.append(UInt8(ascii: "0")) }
            bytes.append(contentsOf: digits.reversed())
        }
        if year < 0 { bytes.append(UInt8(ascii: "-")) }
        append(year < 0 ? -year : year, width: 4)
        bytes.append(UInt8(ascii: "-"))
        append(month, width: 2)
        bytes.append(UInt8(ascii: "-"))
        append(day, width: 2)
        bytes.append(UInt8(ascii: "T"))
        append(hour, width: 2)
        bytes.append(UInt8(ascii: ":"))
        append(minute, width: 2)
        bytes.append(UInt8(ascii: ":"))
        append(second, width: 2)
        bytes.append(UInt8(ascii: "."))
        append(millisecond, width: 3)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
