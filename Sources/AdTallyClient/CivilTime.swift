import Timestamps

/// Conversions between Unix time and the two calendar texts the tracker meets: RFC 3339 timestamps
/// it writes (`occurred_at`, UTC, milliseconds) and IMF-fixdate `Date` headers it reads. Written out
/// by hand because formatters are slow and locale-dependent, and the bytes must be deterministic.
/// The calendar is the server's (`Timestamps.CivilDate`), not a second copy.
enum CivilTime {
    /// Appends `YYYY-MM-DDTHH:MM:SS.mmmZ` for `milliseconds` since 1970 (years 0000-9999).
    static func appendTimestamp(milliseconds: Int64, to bytes: inout [UInt8]) {
        let (seconds, millis) = CivilDate.floorDivide(milliseconds, 1000)
        let (days, secondOfDay) = CivilDate.floorDivide(seconds, 86_400)
        let date = CivilDate(daysSinceEpoch: days)
        appendDigits(min(max(date.year, 0), 9999), width: 4, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        appendDigits(date.month, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        appendDigits(date.day, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "T"))
        appendDigits(secondOfDay / 3600, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        appendDigits(secondOfDay / 60 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        appendDigits(secondOfDay % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        appendDigits(millis, width: 3, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
    }

    /// The timestamp as a `String`, for tests and logs.
    static func timestamp(milliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        appendTimestamp(milliseconds: milliseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Unix seconds of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 5.6.7), or nil for
    /// anything else (the obsolete forms are not sent by AdTally, and a wrong guess is worse than none).
    static func seconds(imfFixdate text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == 0x20, bytes[7] == 0x20,
              bytes[11] == 0x20, bytes[16] == 0x20, bytes[19] == UInt8(ascii: ":"),
              bytes[22] == UInt8(ascii: ":"), bytes[25] == 0x20,
              String(decoding: bytes[26...], as: UTF8.self) == "GMT",
              let day = number(bytes[5..<7]), let year = number(bytes[12..<16]),
              let hour = number(bytes[17..<19]), let minute = number(bytes[20..<22]),
              let second = number(bytes[23..<25]),
              let monthIndex = months.firstIndex(of: String(decoding: bytes[8..<11], as: UTF8.self)),
              (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        let days = CivilDate(year: year, month: Int64(monthIndex + 1), day: day).daysSinceEpoch
        return days * 86_400 + hour * 3600 + minute * 60 + min(second, 59)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func number(_ digits: ArraySlice<UInt8>) -> Int64? {
        var value: Int64 = 0
        for byte in digits {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int64(byte - 0x30)
        }
        return value
    }

    private static func appendDigits(_ value: Int64, width: Int, to bytes: inout [UInt8]) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(0x30 + UInt8(rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }
}
