/// How much of an ad was visible and for how long, measured by the app (usually by a
/// `ViewabilityTracker`). AdTally bills an impression that carries it only when it meets the
/// viewable-impression rule (at least half visible for one continuous second); without it, the
/// server takes the client's word.
public struct Visibility: Sendable, Hashable {
    /// The smallest share of the ad that was visible during the run, 0 to 1.
    public let fraction: Double
    /// How long the run lasted, in milliseconds, 0 to 86,400,000.
    public let milliseconds: Int

    /// The fraction is sent rounded down to four decimal places, so that rounding never claims
    /// more visibility than was measured.
    public init(fraction: Double, milliseconds: Int) {
        self.fraction = fraction
        self.milliseconds = milliseconds
    }

    /// Whether the server would accept these values as well-formed (its rule 1).
    var isWellFormed: Bool {
        fraction.isFinite && fraction >= 0 && fraction <= 1 && milliseconds >= 0 && milliseconds <= 86_400_000
    }
}
