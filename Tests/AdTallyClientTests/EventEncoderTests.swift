@testable import AdTallyClient
import Foundation
import Testing

@Suite(.timeLimit(.minutes(3))) struct EventEncoderTests {
    let id = UUID(uuidString: "5F0C8A1E-7F3B-4A52-9D7E-0C1F2B3A4D5E")!

    func event(_ type: EventType, snapshot: String? = nil, position: Int? = nil, visibility: Visibility? = nil,
               correction: Int64? = nil) -> TrackedEvent {
        TrackedEvent(eventID: id, type: type, sessionID: "sess-9f2", adID: "ad-42", snapshotID: snapshot,
                     position: position, visibility: visibility,
                     deviceTimeMilliseconds: 1_764_424_020_250, correctionMilliseconds: correction)
    }

    /// The contract's example event, key for key in the contract's order, `event_id` lower case.
    @Test func impressionWithEveryField() {
        let body = EventEncoder.batchBody([event(.impression, snapshot: "feed-2026-11-29-0001", position: 3,
                                                 visibility: Visibility(fraction: 0.8, milliseconds: 1200))],
                                          correction: nil)
        #expect(String(decoding: body, as: UTF8.self) == """
            {"events":[{"event_id":"5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e","type":"impression","session_id":"sess-9f2",\
            "ad_id":"ad-42","occurred_at":"2025-11-29T13:47:00.250Z","snapshot_id":"feed-2026-11-29-0001",\
            "position":3,"visible_fraction":0.8,"visible_ms":1200}]}
            """)
    }

    /// A click never carries visibility; an event's own correction wins over the batch's.
    @Test func clickAndCorrections() {
        let own = event(.click, snapshot: "s", visibility: Visibility(fraction: 1, milliseconds: 5), correction: -250)
        let borrowed = event(.click, snapshot: "s")
        let body = String(decoding: EventEncoder.batchBody([own, borrowed], correction: 60_000), as: UTF8.self)
        #expect(body.contains(#""occurred_at":"2025-11-29T13:47:00.000Z","snapshot_id":"s"}"#))
        #expect(body.contains(#""occurred_at":"2025-11-29T13:48:00.250Z","snapshot_id":"s"}"#))
        #expect(!body.contains("visible"))
    }

    /// Fractions are rounded down (never claiming more than was measured) to four places.
    @Test(arguments: [(0.5, "0.5"), (0.49999, "0.4999"), (1.0, "1"), (0.0, "0"), (0.12345, "0.1234"), (0.005, "0.005")])
    func fractions(value: Double, text: String) {
        let body = String(decoding: EventEncoder.batchBody([event(.impression, visibility: Visibility(fraction: value, milliseconds: 1000))],
                                                           correction: nil), as: UTF8.self)
        #expect(body.contains(#""visible_fraction":\#(text),"visible_ms":1000}"#), "\(body)")
    }

    /// The same events and correction always give the same bytes (a retry is the same request).
    @Test func deterministic() {
        let events = [event(.impression, position: 1), event(.click, snapshot: "x", position: 2)]
        #expect(EventEncoder.batchBody(events, correction: 5) == EventEncoder.batchBody(events, correction: 5))
    }

    /// The size bound used to cut batches is never below the real size.
    @Test func maximumSizeBoundsTheRealSize() {
        let long = String(repeating: "z", count: 128)
        let worst = TrackedEvent(eventID: id, type: .impression, sessionID: long, adID: long, snapshotID: long,
                                 position: Int(Int32.max), visibility: Visibility(fraction: 0.1234, milliseconds: 86_400_000),
                                 deviceTimeMilliseconds: 253_402_300_799_999, correctionMilliseconds: nil)
        let alone = EventEncoder.batchBody([worst], correction: nil).count - EventEncoder.bodyOverhead
        #expect(alone <= EventEncoder.maximumSize(of: worst))
    }
}

@Suite(.timeLimit(.minutes(3))) struct CivilTimeTests {
    /// Values from an independent calendar implementation.
    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (Int64(-1), "1969-12-31T23:59:59.999Z"),
        (Int64(951_782_400_000), "2000-02-29T00:00:00.000Z"),
        (Int64(1_796_000_000_000), "2026-11-30T00:53:20.000Z"),
        (Int64(4_102_444_799_999), "2099-12-31T23:59:59.999Z"),
    ])
    func timestamps(milliseconds: Int64, text: String) {
        #expect(CivilTime.timestamp(milliseconds: milliseconds) == text)
    }

    @Test func imfFixdate() {
        #expect(CivilTime.seconds(imfFixdate: "Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(CivilTime.seconds(imfFixdate: "Mon, 30 Nov 2026 00:53:20 GMT") == 1_796_000_000)
        #expect(CivilTime.seconds(imfFixdate: "Sunday, 06-Nov-94 08:49:37 GMT") == nil)
        #expect(CivilTime.seconds(imfFixdate: "Sun, 06 Nov 1994 08:49:37 UTC") == nil)
        #expect(CivilTime.seconds(imfFixdate: "Sun, 06 Xyz 1994 08:49:37 GMT") == nil)
        #expect(CivilTime.seconds(imfFixdate: "") == nil)
    }
}
