import Foundation

/// Fits a feed controller written against the common analytics seam,
///
/// ```swift
/// @MainActor protocol AdTracking { func track(_ event: String, _ properties: [String: Any]) }
/// ```
///
/// with `"ad_impression"` and `"ad_click"` events whose properties carry `"id"` (and `"position"`,
/// optionally `"snapshot_id"`, `"visible_fraction"` and `"visible_ms"`). The app declares the
/// conformance in its own module, `extension AdTrackingAdapter: AdTracking {}`, since the protocol
/// is the app's. Session and snapshot come from the tracker's state.
///
/// `[String: Any]` is not `Sendable`, so the adapter lives on the main actor, where the controller
/// calls it, and turns the properties into plain values there before anything reaches the tracker.
@MainActor
public final class AdTrackingAdapter {
    /// Why an event was not tracked.
    public enum Failure: Error, Sendable, Equatable {
        /// An event name other than `ad_impression` and `ad_click`.
        case unknownEvent(String)
        /// No `"id"` string in the properties.
        case missingAdID(event: String)
        /// A property of the wrong type (`"position"` not an integer, for instance).
        case invalidProperty(String)
        /// The tracker refused the call (no session, no snapshot for a click, an id out of form).
        case tracking(TrackingError)
    }

    /// The tracker the events go to.
    public let tracker: AdTallyTracker
    /// Called on the main actor for every event not tracked; nil to ignore them.
    public var onFailure: ((Failure) -> Void)?
    /// Events not tracked so far, for a debug screen or a test.
    public private(set) var failures: [Failure] = []
    /// The click the latest `"ad_click"` call tracked; nil when that call tracked nothing (and
    /// before the first). The seam's `track` returns nothing, so this is how a controller behind it
    /// gets the click id for the landing page (API 1.5 conversions): read it right after
    /// `track("ad_click", ...)`, on the main actor, where no other call can come between, and open
    /// `lastClick?.landingURL(for: ad.url) ?? ad.url`. Reset by every `"ad_click"` call, so a click
    /// that failed never lends the previous click's id to another ad's page.
    public private(set) var lastClick: TrackedClick?

    /// An adapter in front of `tracker`.
    public init(tracker: AdTallyTracker, onFailure: ((Failure) -> Void)? = nil) {
        self.tracker = tracker
        self.onFailure = onFailure
    }

    /// The seam's one method: converts the properties here, on the main actor, and enqueues the
    /// event (which returns at once).
    public func track(_ event: String, _ properties: [String: Any]) {
        if event == "ad_click" { lastClick = nil }
        do throws(Failure) {
            try convertAndTrack(event, properties)
        } catch {
            failures.append(error)
            onFailure?(error)
        }
    }

    private func convertAndTrack(_ event: String, _ properties: [String: Any]) throws(Failure) {
        guard event == "ad_impression" || event == "ad_click" else { throw .unknownEvent(event) }
        guard let adID = properties["id"] as? String else { throw .missingAdID(event: event) }
        let position = try integer(properties["position"], name: "position")
        var snapshotID: String?
        if let value = properties["snapshot_id"] {
            guard let text = value as? String else { throw .invalidProperty("snapshot_id") }
            snapshotID = text
        }
        var visibility: Visibility?
        if event == "ad_impression",
           let fraction = try number(properties["visible_fraction"], name: "visible_fraction"),
           let milliseconds = try integer(properties["visible_ms"], name: "visible_ms") {
            visibility = Visibility(fraction: fraction, milliseconds: milliseconds)
        }
        do throws(TrackingError) {
            if event == "ad_click" {
                lastClick = try tracker.click(adID: adID, snapshotID: snapshotID, position: position)
            } else {
                try tracker.impression(adID: adID, snapshotID: snapshotID, position: position, visibility: visibility)
            }
        } catch {
            throw .tracking(error)
        }
    }

    /// An integer property: `Int` or any other integer type, or an `NSNumber` holding a whole number.
    private func integer(_ value: Any?, name: String) throws(Failure) -> Int? {
        guard let value else { return nil }
        if let int = value as? Int { return int }
        if let integer = value as? any BinaryInteger, let int = Int(exactly: integer) { return int }
        if let number = value as? NSNumber, let int = Int(exactly: number.doubleValue) { return int }
        throw .invalidProperty(name)
    }

    private func number(_ value: Any?, name: String) throws(Failure) -> Double? {
        guard let value else { return nil }
        if let double = value as? Double { return double }
        if let integer = value as? any BinaryInteger { return Double(integer) }
        if let number = value as? NSNumber { return number.doubleValue }
        throw .invalidProperty(name)
    }
}
