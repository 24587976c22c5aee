/// The numbers of one report row: billable (`accepted`) impressions and clicks, and beside them what
/// was not billed. Every count comes straight from `count(*)` over stored events.
public struct ReportCounts: Sendable, Equatable {
    public var impressions: Int64 = 0
    public var clicks: Int64 = 0
    public var duplicateImpressions: Int64 = 0
    public var rejectedImpressions: Int64 = 0
    public var duplicateClicks: Int64 = 0
    public var rejectedClicks: Int64 = 0

    public init(impressions: Int64 = 0, clicks: Int64 = 0, duplicateImpressions: Int64 = 0, rejectedImpressions: Int64 = 0,
                duplicateClicks: Int64 = 0, rejectedClicks: Int64 = 0) {
        self.impressions = impressions
        self.clicks = clicks
        self.duplicateImpressions = duplicateImpressions
        self.rejectedImpressions = rejectedImpressions
        self.duplicateClicks = duplicateClicks
        self.rejectedClicks = rejectedClicks
    }

    /// `clicks / impressions` rounded to 6 decimal places, half away from zero; nil without impressions.
    public var ctr: Double? { Self.ctr(clicks: clicks, impressions: impressions) }

    /// The rounding is done in integers, so that a ratio exactly half-way in decimal
    /// (`5 / 8,000,000 = 0.000000625`) rounds up as the contract says instead of following the binary
    /// value of a `Double`. The result is the `Double` nearest to the 6-decimal number, which prints
    /// in its shortest form (`0.025`).
    public static func ctr(clicks: Int64, impressions: Int64) -> Double? {
        guard impressions > 0 else { return nil }
        // Counts are non-negative and far below 2^40, so neither product overflows.
        let millionths = (2 * clicks * 1_000_000 + impressions) / (2 * impressions)
        return Double(millionths) / 1_000_000
    }
}

extension CountValues {
    /// The six totals a report row shows.
    public var totals: ReportCounts {
        ReportCounts(impressions: self[.impressions], clicks: self[.clicks], duplicateImpressions: self[.duplicateImpressions],
                     rejectedImpressions: self[.rejectedImpressions], duplicateClicks: self[.duplicateClicks], rejectedClicks: self[.rejectedClicks])
    }
}
