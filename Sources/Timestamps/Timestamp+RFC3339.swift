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

        guard (1...12).contains(month), day >= 1, day <= CivilDate.daysInMonth(year: year, month: month),
              hour <= 23, minute <= 59, second <= 60
        else { return nil }
        if second == 60 {
            second = 59
            microseconds = 999_999
        }

        let days = CivilDate(year: year, month: month, day: day).daysSinceEpoch
        let localSeconds = days * 86_400 + hour * 3600 + minute * 60 + second
        let total = (localSeconds - offsetSeconds) * microsecondsPerSecond + microseconds
        guard total >= earliestMicroseconds && total <= latestMicroseconds else { return nil }
        return total
    }

    /// The contract's output form: UTC, `Z`, millisecond precision (`2026-11-29T13:47:00.250Z`),
    /// truncated toward the earlier instant (microseconds 999,999 give `.999`, never the next second).
    /// Years outside 0000–9999 (only reachable through `init(microsecondsSinceEpoch:)`) are written
    /// with as many digits as they need and a `-` sign before year zero.
    public var rfc3339: String {
        let (days, microsOfDay) = CivilDate.floorDivide(microsecondsSinceEpoch, 86_400_000_000)
        let date = CivilDate(daysSinceEpoch: days)
        let (year, month, day) = (date.year, date.month, date.day)
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
        // Each field after the year with the separator before it: two digits, three for milliseconds.
        for (separator, value) in zip("--T::.".utf8, [month, day, hour, minute, second, millisecond]) {
            bytes.append(separator)
            append(value, width: separator == UInt8(ascii: ".") ? 3 : 2)
        }
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
