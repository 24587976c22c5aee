/// Why a call to `impression` or `click` did not enqueue an event. Each case is a mistake in the app's
/// calls that the server would refuse anyway (as `invalid_event`, which it does not even store), so
/// the tracker says so at the call instead of sending an event that can only be rejected.
public enum TrackingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No session was set with `setSession(_:snapshotID:)`.
    case noSession
    /// A click needs the snapshot the ad was drawn from (the server's grace window and row check
    /// judge it against that snapshot), and none was given or set with `setSnapshot(_:)`.
    case noSnapshot
    /// An identifier is not 1 to 128 characters from `A-Z a-z 0-9 . _ : ~ -`.
    case invalidIdentifier(field: String, value: String)
    /// `position` is negative or beyond 2,147,483,647.
    case invalidPosition(Int)
    /// `visible_fraction` outside 0...1 or `visible_ms` outside 0...86,400,000.
    case invalidVisibility(Visibility)
    /// The tracker was shut down.
    case stopped

    /// A sentence for a log line.
    public var description: String {
        switch self {
        case .noSession: "no session set: call setSession(_:snapshotID:) first"
        case .noSnapshot: "a click must name its snapshot: pass snapshotID or call setSnapshot(_:)"
        case let .invalidIdentifier(field, value): "\(field) \"\(value)\" is not 1 to 128 characters of A-Z a-z 0-9 . _ : ~ -"
        case let .invalidPosition(position): "position \(position) is not in 0...2147483647"
        case let .invalidVisibility(visibility): "visibility \(visibility.fraction) for \(visibility.milliseconds) ms is out of range"
        case .stopped: "the tracker was shut down"
        }
    }
}
