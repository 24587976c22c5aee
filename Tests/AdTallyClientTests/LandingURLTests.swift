@testable import AdTallyClient
import Foundation
import Testing

/// The landing URL of API 1.5's conversions: the ad's `url` with `adtally_click_id=<event_id>`,
/// the rest byte for byte. Every expected URL is written out by hand.
@Suite(.timeLimit(.minutes(5))) struct LandingURLTests {
    /// The click id of every row; its text in lower case is `3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f`.
    static let clickID = UUID(uuid: (0x3F, 0x0C, 0x2D, 0x8E, 0x9B, 0x1A, 0x4C, 0x5D,
                                     0x8E, 0x7F, 0x0A, 0x1B, 0x2C, 0x3D, 0x4E, 0x5F))

    struct Row: Sendable, CustomTestStringConvertible {
        let name: String
        let adURL: String
        let expected: String
        var testDescription: String { name }
    }

    static let rows: [Row] = [
        Row(name: "no query",
            adURL: "https://acme.example/landing",
            expected: "https://acme.example/landing?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "no path, no query",
            adURL: "https://acme.example",
            expected: "https://acme.example?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "a query, kept in order",
            adURL: "https://acme.example/landing?c=9&utm_source=feed",
            expected: "https://acme.example/landing?c=9&utm_source=feed&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "percent-encoding and plus signs kept as they are",
            adURL: "https://acme.example/p?q=a%26b+c&name=%7Ejo%C3%A9&x=%2f",
            expected: "https://acme.example/p?q=a%26b+c&name=%7Ejo%C3%A9&x=%2f&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "an existing click id replaced in its place",
            adURL: "https://acme.example/p?a=1&adtally_click_id=old&b=2",
            expected: "https://acme.example/p?a=1&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f&b=2"),
        Row(name: "later duplicates removed with their ampersands",
            adURL: "https://acme.example/p?adtally_click_id=1&a=1&adtally_click_id=2&b=2&adtally_click_id=3",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f&a=1&b=2"),
        Row(name: "only a click id, before a fragment",
            adURL: "https://acme.example/p?adtally_click_id=old#f",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#f"),
        Row(name: "a percent-encoded name is the same parameter",
            adURL: "https://acme.example/p?adtally%5Fclick%5fid=old&a=1",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f&a=1"),
        Row(name: "a click id without a value and an empty one",
            adURL: "https://acme.example/p?adtally_click_id&a=1&adtally_click_id=",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f&a=1"),
        Row(name: "another case or a longer name is another parameter",
            adURL: "https://acme.example/p?ADTALLY_CLICK_ID=x&adtally_click_id_old=y&my_adtally_click_id=z",
            expected: "https://acme.example/p?ADTALLY_CLICK_ID=x&adtally_click_id_old=y&my_adtally_click_id=z&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "semicolons do not separate fields",
            adURL: "https://acme.example/p?a=1;adtally_click_id=old",
            expected: "https://acme.example/p?a=1;adtally_click_id=old&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "a bare percent sign in a name",
            adURL: "https://acme.example/p?50%=off&x%2",
            expected: "https://acme.example/p?50%=off&x%2&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "the fragment kept after the query",
            adURL: "https://acme.example/p?a=1#section-2",
            expected: "https://acme.example/p?a=1&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#section-2"),
        Row(name: "a fragment and no query",
            adURL: "https://acme.example/p#top",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#top"),
        Row(name: "a question mark in the fragment is not a query",
            adURL: "https://app.example/#/route?x=1",
            expected: "https://app.example/?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#/route?x=1"),
        Row(name: "a click id in the fragment is the page's own",
            adURL: "https://acme.example/p#adtally_click_id=old",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#adtally_click_id=old"),
        Row(name: "an empty query",
            adURL: "https://acme.example/p?",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "an empty query before a fragment",
            adURL: "https://acme.example/p?#f",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#f"),
        Row(name: "a trailing ampersand",
            adURL: "https://acme.example/p?a=1&",
            expected: "https://acme.example/p?a=1&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "empty fields kept",
            adURL: "https://acme.example/p?a=1&&b=2",
            expected: "https://acme.example/p?a=1&&b=2&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "a replaced click id keeps the trailing ampersand",
            adURL: "https://acme.example/p?adtally_click_id=old&",
            expected: "https://acme.example/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f&"),
        Row(name: "https with a port",
            adURL: "https://acme.example:8443/landing?c=9",
            expected: "https://acme.example:8443/landing?c=9&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "an IPv6 literal host with a port",
            adURL: "https://[2001:db8::1]:8443/p",
            expected: "https://[2001:db8::1]:8443/p?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
        Row(name: "an IPv6 literal host, a query and a fragment",
            adURL: "https://[::1]/p?a=1#x",
            expected: "https://[::1]/p?a=1&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#x"),
        Row(name: "scheme, host and path in their own case",
            adURL: "HTTPS://Acme.Example/Landing/%7Euser/",
            expected: "HTTPS://Acme.Example/Landing/%7Euser/?adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f"),
    ]

    @Test(arguments: rows) func landingURL(_ row: Row) {
        #expect(LandingURL.adding(clickID: Self.clickID, to: row.adURL) == row.expected)
        #expect(TrackedClick(eventID: Self.clickID, adID: "ad-1").landingURL(for: row.adURL) == row.expected)
    }

    /// An ad URL kept as a `URL` comes back as one, the same bytes.
    @Test func landingURLOfAURL() throws {
        let adURL = try #require(URL(string: "https://acme.example/p?q=a%26b+c#f"))
        let landing = TrackedClick(eventID: Self.clickID, adID: "ad-1").landingURL(for: adURL)
        #expect(landing.absoluteString == "https://acme.example/p?q=a%26b+c&adtally_click_id=3f0c2d8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f#f")
    }

    /// The click id in the landing URL is the `event_id` the server receives for the click.
    @Test func theClickIDIsTheEventIDSent() async throws {
        let fixture = try TrackerFixture()
        let click = try fixture.tracker.click(adID: "ad-7", position: 2)
        let flush = Task { await fixture.tracker.flush() }
        let events = try ServerAnswers.events(in: try await fixture.acceptNext())
        #expect(await flush.value == .delivered)
        let sent = try #require(events.first?["event_id"] as? String)
        #expect(click.clickID == sent)
        #expect(click.adID == "ad-7")
        #expect(click.landingURL(for: "https://acme.example/landing?c=9")
            == "https://acme.example/landing?c=9&adtally_click_id=\(sent)")
        await fixture.shutdown()
    }
}
