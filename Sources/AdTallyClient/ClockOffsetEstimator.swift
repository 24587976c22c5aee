/// Estimates how far the device's clock is from the server's, from the `Date` header of the
/// server's answers. The server's rule 1 (`occurred_at` within 7 days back and 10 minutes ahead) and
/// its click grace window judge `occurred_at` on the server's clock, and a phone's clock can be
/// minutes off.
///
/// A `Date` header has whole seconds and was written at some instant between sending the request
/// and receiving the answer, so one exchange bounds the offset (server minus device):
/// `date - received <= offset < date + 1 s - sent`. The estimator intersects the bounds of
/// successive exchanges, which narrows them to well under a second; when a new exchange contradicts
/// the others (the device's clock was set), it starts over from that one.
///
/// The correction it gives is 0 while 0 lies within the bounds (the device's clock cannot be told
/// from right, so it is left alone), and otherwise the middle of the bounds: at most half their
/// width from the truth.
struct ClockOffsetEstimator: Sendable, Equatable {
    /// The offset lies in `lower..<upper` (milliseconds, server minus device).
    private(set) var lower: Int64?
    private(set) var upper: Int64?

    init() {}

    /// Records one exchange: the header's Unix seconds and the device's clock, in milliseconds, when
    /// the request was sent and its answer received.
    mutating func observe(dateSeconds: Int64, sentAt: Int64, receivedAt: Int64) {
        guard receivedAt >= sentAt else { return } // the device's clock moved back meanwhile: no bound
        let newLower = dateSeconds * 1000 - receivedAt
        let newUpper = dateSeconds * 1000 + 1000 - sentAt
        if let lower, let upper, max(lower, newLower) < min(upper, newUpper) {
            self.lower = max(lower, newLower)
            self.upper = min(upper, newUpper)
        } else {
            lower = newLower
            upper = newUpper
        }
    }

    /// Milliseconds to add to the device's clock; nil before any exchange.
    var correction: Int64? {
        guard let lower, let upper else { return nil }
        if lower <= 0, 0 < upper { return 0 }
        return lower + (upper - lower) / 2
    }
}
