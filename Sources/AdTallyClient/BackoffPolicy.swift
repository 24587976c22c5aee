/// How long the tracker waits before sending again after a failure it may retry (no answer, `408`,
/// `429`, `5xx`): exponential from `base`, at most `cap`, with "equal jitter" (a random point in the
/// upper half of the step, so that a fleet of phones spreads out after an outage and none comes back
/// at once), and never sooner than the server's `Retry-After`: at least that, plus a random part of
/// up to half of it (at most `longestRetryAfterSpread`), so that the phones a server refused in the
/// same second (a `429` from its limits per client, a `503` while its database is away) do not all
/// come back in the same second either.
struct BackoffPolicy: Sendable {
    var base: Duration
    var cap: Duration
    /// The longest `Retry-After` honoured; a larger one is taken as this (a misconfigured proxy must
    /// not park the queue for a day).
    static let longestRetryAfter: Duration = .seconds(3600)
    /// The most the random part added after a `Retry-After` may be.
    static let longestRetryAfterSpread: Duration = .seconds(30)

    /// The wait after `failures` consecutive failures (1 for the first), where `unit` is a random
    /// number in 0...1.
    func delay(afterFailures failures: Int, unit: Double, retryAfter: Duration?) -> Duration {
        let exponent = min(max(failures - 1, 0), 62)
        let baseSeconds = Double(base.components.seconds) + Double(base.components.attoseconds) / 1e18
        let capSeconds = Double(cap.components.seconds) + Double(cap.components.attoseconds) / 1e18
        let step = min(capSeconds, baseSeconds * pow2(exponent))
        let jittered = step / 2 + step / 2 * min(max(unit, 0), 1)
        let wait = Duration.milliseconds(Int64((jittered * 1000).rounded(.up)))
        guard let retryAfter else { return wait }
        let floor = min(retryAfter, Self.longestRetryAfter)
        let spread = min(floor / 2, Self.longestRetryAfterSpread)
        let spreadMilliseconds = Double(spread.components.seconds) * 1000 + Double(spread.components.attoseconds) / 1e15
        let jitter = Duration.milliseconds(Int64((spreadMilliseconds * min(max(unit, 0), 1)).rounded(.up)))
        return max(wait, floor + jitter)
    }

    private func pow2(_ exponent: Int) -> Double {
        var value = 1.0
        for _ in 0..<exponent { value *= 2 }
        return value
    }

    /// `Retry-After` as delay-seconds or as an HTTP date (relative to the answer's own `Date`, so the
    /// device's clock does not matter); nil when absent or unreadable.
    static func retryAfter(_ value: String?, date: String?) -> Duration? {
        guard let value = value?.trimmingWhitespace, !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            guard let seconds = Int64(value.prefix(9)) else { return nil }
            return .seconds(seconds)
        }
        guard let until = CivilTime.seconds(imfFixdate: value), let now = date.flatMap(CivilTime.seconds(imfFixdate:))
        else { return nil }
        return .seconds(max(0, until - now))
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (header values).
    var trimmingWhitespace: String {
        var view = Substring(self)
        while let first = view.first, first == " " || first == "\t" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "\t" { view = view.dropLast() }
        return String(view)
    }
}
