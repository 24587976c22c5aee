import Foundation
import Timestamps

/// Conversions between `timestamptz` text (with the session in UTC) and instants, written by hand:
/// `DateFormatter` is slow, locale-sensitive and drops microseconds.
public enum PostgresTimestamp {
    /// Microseconds since the Unix epoch of a `Date`, rounded to the nearest microsecond.
    public static func microseconds(of date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1_000_000).rounded()
        if value >= Double(Int64.max) { return Int64.max }
        if value <= Double(Int64.min) { return Int64.min }
        return Int64(value)
    }

    /// A `timestamptz` literal in UTC with six fraction digits: `2026-11-29 13:47:00.250000+00`.
    public static func format(microseconds: Int64) -> String {
        let (days, micros) = CivilDate.floorDivide(microseconds, 86_400_000_000)
        let date = CivilDate(daysSinceEpoch: days)
        let (year, month, day) = (date.year, date.month, date.day)
        let seconds = micros / 1_000_000
        // Written digit by digit: this runs for every event of every batch, and String(format:)
        // goes through CoreFoundation's printf.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            var rest = value
            if rest >= divisor * 10 {  // a year beyond the width: all its digits
                bytes.append(contentsOf: String(rest).utf8)
                return
            }
            while divisor > 0 {
                bytes.append(UInt8(truncatingIfNeeded: 48 + (rest / divisor) % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        if year < 0 { return String(format: "%04lld-%02lld-%02lld %02lld:%02lld:%02lld.%06lld+00", year, month, day,
                                    seconds / 3600, (seconds / 60) % 60, seconds % 60, micros % 1_000_000) }
        digits(year, 4); bytes.append(45)
        digits(month, 2); bytes.append(45)
        digits(day, 2); bytes.append(32)
        digits(seconds / 3600, 2); bytes.append(58)
        digits((seconds / 60) % 60, 2); bytes.append(58)
        digits(seconds % 60, 2); bytes.append(46)
        digits(micros % 1_000_000, 6)
        bytes.append(contentsOf: "+00".utf8)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses PostgreSQL's output for `timestamptz` in ISO DateStyle (`2026-11-29 13:47:00.25+00`,
    /// `+05:30`, `-08`, years beyond 9999). Returns nil for anything else (`infinity`, BC dates).
    public static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(minDigits: Int, maxDigits: Int) -> Int64? {
            var value: Int64 = 0
            var count = 0
            while index < bytes.count, count < maxDigits, bytes[index] >= 48, bytes[index] <= 57 {
                value = value * 10 + Int64(bytes[index] - 48)
                index += 1
                count += 1
            }
            return count >= minDigits ? value : nil
        }
        func expect(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }
        guard let year = number(minDigits: 4, maxDigits: 7), expect(45),
              let month = number(minDigits: 2, maxDigits: 2), expect(45),
              let day = number(minDigits: 2, maxDigits: 2), expect(32) || expect(84),
              let hour = number(minDigits: 2, maxDigits: 2), expect(58),
              let minute = number(minDigits: 2, maxDigits: 2), expect(58),
              let second = number(minDigits: 2, maxDigits: 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var fraction: Int64 = 0
        if expect(46) {
            var digits = 0
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                if digits < 6 { fraction = fraction * 10 + Int64(bytes[index] - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 6) { fraction *= 10 }
        }
        var offsetSeconds: Int64 = 0
        if index < bytes.count {
            let sign: Int64
            if expect(43) { sign = 1 } else if expect(45) { sign = -1 } else { return nil }
            guard let offsetHours = number(minDigits: 2, maxDigits: 2) else { return nil }
            var offsetMinutes: Int64 = 0
            var offsetSecondsPart: Int64 = 0
            if expect(58) {
                guard let minutes = number(minDigits: 2, maxDigits: 2) else { return nil }
                offsetMinutes = minutes
                if expect(58) {
                    guard let seconds = number(minDigits: 2, maxDigits: 2) else { return nil }
                    offsetSecondsPart = seconds
                }
            }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60 + offsetSecondsPart)
        }
        guard index == bytes.count else { return nil }
        let days = CivilDate(year: year, month: month, day: day).daysSinceEpoch
        let secondsOfDay = hour * 3600 + minute * 60 + second
        return (days * 86_400 + secondsOfDay - offsetSeconds) * 1_000_000 + fraction
    }
}
