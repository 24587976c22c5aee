import Foundation

/// A click the tracker has enqueued, as `AdTallyTracker.click` returns it. Its `eventID` is also
/// its click id (API 1.5): the app opens the ad's landing page with it, `landingURL(for:)`, so that
/// the advertiser can later report what the click led to (`POST /v1/conversions`) and AdTally can
/// attribute it. The id is fixed at the call and never changes through retries and restarts, so the
/// id in the landing URL is the one the server stores, whenever the click reaches it.
public struct TrackedClick: Sendable, Hashable {
    /// The click's `event_id`, which is its click id.
    public let eventID: UUID
    /// The ad clicked.
    public let adID: String

    /// A click of the given parts (the tracker makes them; an app's tests may too).
    public init(eventID: UUID, adID: String) {
        self.eventID = eventID
        self.adID = adID
    }

    /// The click id as the URL and the server carry it: the `event_id` in lower case.
    public var clickID: String { EventEncoder.lowercaseUUID(eventID) }

    /// The ad's `url` with `adtally_click_id` set to this click's id, the rest kept byte for byte
    /// (`LandingURL` has the rules): what the app opens instead of the ad's bare URL.
    public func landingURL(for adURL: String) -> String {
        LandingURL.adding(clickID: eventID, to: adURL)
    }

    /// As `landingURL(for:)` with a `String`, for an ad URL the app keeps as a `URL`.
    public func landingURL(for adURL: URL) -> URL {
        LandingURL.adding(clickID: eventID, to: adURL)
    }
}
