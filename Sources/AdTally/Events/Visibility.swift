/// What an impression reports about how much of the ad was seen, for the viewable-impression rule
/// (`fraction >= 0.5` and `milliseconds >= 1000`, checked by the rules, not here).
public struct Visibility: Sendable, Hashable {
    /// The visible share of the ad, 0…1 (`-0` is read as `0`).
    public let fraction: Double
    /// Continuous visibility at that fraction, 0…86,400,000 ms.
    public let milliseconds: Int32

    public init(fraction: Double, milliseconds: Int32) {
        self.fraction = fraction
        self.milliseconds = milliseconds
    }
}
