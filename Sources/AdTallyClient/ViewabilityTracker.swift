/// Decides when an ad has been seen: the app feeds it each ad cell's visible fraction as the feed
/// scrolls (and 0 when the cell leaves the screen), and it emits one `ViewableImpression` per ad per
/// session at the moment the ad has been at least half visible for one continuous second, the
/// industry's viewable-impression rule and the one AdTally checks. Counting on every appearance
/// instead (`willDisplay`) bills ads that flashed past and counts every scroll back.
///
/// A pure value: times are given, not read (pass `tracker.clock.uptime()`, or a display link's
/// timestamp), so that its behaviour is a function of its inputs. Between two updates an ad's
/// fraction is taken to be the last one given; when no update comes (the user stopped scrolling),
/// call `advance(to:)` by `nextDeadline` to catch the moment a still ad becomes viewable.
public struct ViewabilityTracker: Sendable {
    /// At least this share of the ad must be visible (default 0.5).
    public let minimumFraction: Double
    /// For at least this long, continuously (default 1 s).
    public let minimumDuration: Duration

    private struct Run: Sendable {
        var start: Duration
        var lowest: Double
        var position: Int?
    }

    private var runs: [String: Run] = [:]
    private var counted = Set<String>()
    private var latest: Duration?

    /// A tracker of the given rule; the defaults are AdTally's.
    public init(minimumFraction: Double = 0.5, minimumDuration: Duration = .seconds(1)) {
        self.minimumFraction = minimumFraction
        self.minimumDuration = minimumDuration
    }

    /// Records that `adID` is `visibleFraction` visible from `time` on (0 when off screen), and
    /// returns the impressions that became viewable up to `time`, oldest first. Times must not go
    /// backwards; an earlier one is taken as the latest seen.
    public mutating func update(adID: String, visibleFraction: Double, position: Int? = nil,
                                at time: Duration) -> [ViewableImpression] {
        let now = max(time, latest ?? time)
        var emitted = advance(to: now)
        guard !counted.contains(adID) else { return emitted }
        let fraction = visibleFraction.isNaN ? 0 : min(max(visibleFraction, 0), 1)
        if fraction >= minimumFraction {
            if var run = runs[adID] {
                run.lowest = min(run.lowest, fraction)
                run.position = position ?? run.position
                runs[adID] = run
            } else {
                runs[adID] = Run(start: now, lowest: fraction, position: position)
            }
            emitted += advance(to: now)
        } else {
            runs[adID] = nil
        }
        return emitted
    }

    /// Lets time pass without a change of fractions; returns the impressions that became viewable
    /// up to `time`, oldest first.
    public mutating func advance(to time: Duration) -> [ViewableImpression] {
        let now = max(time, latest ?? time)
        latest = now
        let due = runs.filter { $0.value.start + minimumDuration <= now }
            .sorted { ($0.value.start, $0.key) < ($1.value.start, $1.key) }
        let milliseconds = Int(minimumDuration.components.seconds * 1000
            + minimumDuration.components.attoseconds / 1_000_000_000_000_000)
        return due.map { adID, run in
            runs[adID] = nil
            counted.insert(adID)
            return ViewableImpression(adID: adID, position: run.position,
                                      visibility: Visibility(fraction: run.lowest, milliseconds: milliseconds),
                                      at: run.start + minimumDuration)
        }
    }

    /// Every ad leaves the screen at `time` (the app went to the background, the feed was replaced):
    /// returns what became viewable up to then, and breaks every run.
    public mutating func hideAll(at time: Duration) -> [ViewableImpression] {
        let emitted = advance(to: time)
        runs.removeAll()
        return emitted
    }

    /// When the next impression would become viewable if nothing changes; nil when no ad is in a run.
    public var nextDeadline: Duration? {
        runs.values.map { $0.start + minimumDuration }.min()
    }

    /// Whether `adID` already had its impression this session.
    public func hasCounted(_ adID: String) -> Bool { counted.contains(adID) }

    /// A new session: every ad may be counted again (AdTally counts one impression per ad per
    /// session).
    public mutating func startSession() {
        runs.removeAll()
        counted.removeAll()
    }
}
