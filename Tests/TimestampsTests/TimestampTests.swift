import Foundation
import Testing
@testable import Timestamps

/// Expected instants come from `date -u -d … +%s` (GNU coreutils), not from the code under test.
@Suite(.timeLimit(.minutes(3))) struct TimestampTests {
    struct Valid: CustomTestStringConvertible, Sendable {
        let text: String
        let seconds: Int64
        let micros: Int64
        init(_ text: String, _ seconds: Int64, micros: Int64 = 0) {
            self.text = text; self.seconds = seconds; self.micros = micros
        }
        var testDescription: String { text }
    }

    static let valid: [Valid] = [
        Valid("2026-11-29T13:47:00Z", 1_795_960_020),
        Valid("2026-11-29T14:47:00.250+01:00", 1_795_960_020, micros: 250_000),
        Valid("2026-11-29t13:47:00z", 1_795_960_020),
        Valid("2026-11-29T19:17:00+05:30", 1_795_960_020),
        Valid("2026-11-29T05:47:00-08:00", 1_795_960_020),
        Valid("2026-11-29T13:47:00-00:00", 1_795_960_020),
        Valid("2026-11-29T13:47:00+00:00", 1_795_960_020),
        Valid("2026-11-29T08:17:00Z", 1_795_940_220),
        Valid("2026-11-30T13:46:00+23:59", 1_795_960_020),
        // Fraction digits 0 through 9: truncated past microseconds, never rounded.
        Valid("2026-11-29T13:47:00.1Z", 1_795_960_020, micros: 100_000),
        Valid("2026-11-29T13:47:00.12Z", 1_795_960_020, micros: 120_000),
        Valid("2026-11-29T13:47:00.123Z", 1_795_960_020, micros: 123_000),
        Valid("2026-11-29T13:47:00.1234Z", 1_795_960_020, micros: 123_400),
        Valid("2026-11-29T13:47:00.12345Z", 1_795_960_020, micros: 123_450),
        Valid("2026-11-29T13:47:00.123456Z", 1_795_960_020, micros: 123_456),
        Valid("2026-11-29T13:47:00.1234567Z", 1_795_960_020, micros: 123_456),
        Valid("2026-11-29T13:47:00.12345678Z", 1_795_960_020, micros: 123_456),
        Valid("2026-11-29T13:47:00.123456789Z", 1_795_960_020, micros: 123_456),
        Valid("2026-11-29T13:47:00.999999999Z", 1_795_960_020, micros: 999_999),
        Valid("2026-11-29T13:47:00.000000000000000000001Z", 1_795_960_020),
        // Calendar edges.
        Valid("2024-02-29T23:59:59Z", 1_709_251_199),
        Valid("2000-02-29T00:00:00Z", 951_868_800 - 86_400),
        Valid("2000-03-01T00:00:00Z", 951_868_800),
        Valid("1900-03-01T00:00:00Z", -2_203_891_200),
        Valid("2026-03-01T00:30:00+01:00", 1_772_321_400),
        Valid("1969-12-31T23:59:59Z", -1),
        Valid("1969-12-31T23:59:59.5Z", -1, micros: 500_000),
        Valid("0000-01-01T00:00:00Z", -62_167_219_200),
        Valid("9999-12-31T23:59:59.999999Z", 253_402_300_799, micros: 999_999),
        // Leap second: clamped to the last microsecond of the same minute.
        Valid("2016-12-31T23:59:60Z", 1_483_228_799, micros: 999_999),
        Valid("2016-12-31T23:59:60.5Z", 1_483_228_799, micros: 999_999),
    ]

    @Test(arguments: valid)
    func parses(_ testCase: Valid) throws {
        let timestamp = try #require(Timestamp(rfc3339: testCase.text))
        #expect(timestamp.microsecondsSinceEpoch == testCase.seconds * 1_000_000 + testCase.micros)
    }

    static let invalid: [String] = [
        "",
        "2026-11-29 13:47:00Z",          // space separator refused
        "2026-11-29T13:47:00",           // no offset
        "2026-11-29T13:47Z",             // no seconds
        "2026-11-29",                    // date only
        "2026-13-01T00:00:00Z",          // month 13
        "2026-00-01T00:00:00Z",          // month 0
        "2026-01-00T00:00:00Z",          // day 0
        "2026-01-32T00:00:00Z",
        "2026-02-29T00:00:00Z",          // not a leap year
        "1900-02-29T00:00:00Z",          // century, not a leap year
        "2026-04-31T00:00:00Z",
        "2026-11-29T24:00:00Z",          // hour 24
        "2026-11-29T23:60:00Z",          // minute 60
        "2026-11-29T23:59:61Z",          // second 61
        "2026-11-29T13:47:00.Z",         // dot without digits
        "2026-11-29T13:47:00,5Z",        // comma fraction
        "2026-11-29T13:47:00+24:00",     // offset hour 24
        "2026-11-29T13:47:00+05:60",     // offset minute 60
        "2026-11-29T13:47:00+0530",      // offset without colon
        "2026-11-29T13:47:00+05",        // offset without minutes
        "2026-11-29T13:47:00ZZ",         // trailing garbage
        "2026-11-29T13:47:00Z ",         // trailing space
        " 2026-11-29T13:47:00Z",         // leading space
        "26-11-29T13:47:00Z",            // two-digit year
        "2026-1-29T13:47:00Z",           // one-digit month
        "+2026-11-29T13:47:00Z",         // signed year
        "２０２６-11-29T13:47:00Z",        // fullwidth digits
        "2026-11-29T13:47:00UTC",
        "2026-11-29X13:47:00Z",
        "9999-12-31T23:59:59-01:00",     // past year 9999 in UTC
        "0000-01-01T00:00:00+01:00",     // before year 0000 in UTC
    ]

    @Test(arguments: invalid)
    func refuses(_ text: String) {
        #expect(Timestamp(rfc3339: text) == nil)
    }

    struct Formatted: CustomTestStringConvertible, Sendable {
        let micros: Int64
        let text: String
        var testDescription: String { "\(micros) → \(text)" }
    }

    static let formatted: [Formatted] = [
        Formatted(micros: 0, text: "1970-01-01T00:00:00.000Z"),
        Formatted(micros: 1_795_960_020_250_000, text: "2026-11-29T13:47:00.250Z"),
        Formatted(micros: 999, text: "1970-01-01T00:00:00.000Z"),
        Formatted(micros: 1_999, text: "1970-01-01T00:00:00.001Z"),
        Formatted(micros: -1, text: "1969-12-31T23:59:59.999Z"),
        Formatted(micros: -1_000_000, text: "1969-12-31T23:59:59.000Z"),
        Formatted(micros: 1_709_251_199_999_999, text: "2024-02-29T23:59:59.999Z"),
        Formatted(micros: -2_203_891_200_000_000, text: "1900-03-01T00:00:00.000Z"),
        Formatted(micros: -62_167_219_200_000_000, text: "0000-01-01T00:00:00.000Z"),
        Formatted(micros: 253_402_300_799_999_999, text: "9999-12-31T23:59:59.999Z"),
    ]

    @Test(arguments: formatted)
    func formatsUTCMillisecondsTruncating(_ testCase: Formatted) {
        #expect(Timestamp(microsecondsSinceEpoch: testCase.micros).rfc3339 == testCase.text)
    }

    @Test func extremeValuesFormatWithoutTrapping() {
        #expect(!Timestamp(microsecondsSinceEpoch: .max).rfc3339.isEmpty)
        #expect(Timestamp(microsecondsSinceEpoch: .min).rfc3339.hasPrefix("-"))
        #expect(Timestamp(microsecondsSinceEpoch: .max).adding(microseconds: 1).microsecondsSinceEpoch == .max)
        #expect(Timestamp(microsecondsSinceEpoch: .min).adding(microseconds: -1).microsecondsSinceEpoch == .min)
    }

    /// Property: formatting then parsing gives the instant truncated to the millisecond, across the
    /// whole supported range (deterministic pseudo-random samples).
    @Test func formatThenParseRoundTrips() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let low = Timestamp.earliestMicroseconds
        let span = UInt64(Timestamp.latestMicroseconds - low)
        for _ in 0..<5_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let micros = low + Int64((state >> 1) % span)
            let text = Timestamp(microsecondsSinceEpoch: micros).rfc3339
            let parsed = try #require(Timestamp(rfc3339: text))
            let floorMillis = micros - ((micros % 1000) + 1000) % 1000
            #expect(parsed.microsecondsSinceEpoch == floorMillis, "\(micros) → \(text)")
        }
    }

    /// Cross-check the civil-date arithmetic against Foundation's Gregorian calendar, day by day
    /// through 1600-2500 (Foundation switches to the Julian calendar before 1582).
    @Test func civilDatesAgreeWithFoundation() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        let start = CivilDate(year: 1600, month: 1, day: 1).daysSinceEpoch
        let end = CivilDate(year: 2500, month: 12, day: 31).daysSinceEpoch
        var day = start
        while day <= end {
            let date = Date(timeIntervalSince1970: Double(day) * 86_400)
            let parts = calendar.dateComponents([.year, .month, .day], from: date)
            let civil = CivilDate(daysSinceEpoch: day)
            guard Int64(parts.year ?? 0) == civil.year, Int64(parts.month ?? 0) == civil.month,
                  Int64(parts.day ?? 0) == civil.day
            else {
                Issue.record("day \(day): Foundation \(parts), ours \(civil)")
                return
            }
            day += 7
        }
    }
}
