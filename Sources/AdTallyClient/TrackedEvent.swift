import Foundation

/// One event as the tracker keeps it from the call until the server answers: everything the
/// contract sends, with `occurred_at` kept as the device clock at the call plus the correction known
/// then, so that the same event always encodes to the same bytes (also after a restart).
struct TrackedEvent: Sendable, Equatable {
    var eventID: UUID
    var type: EventType
    var sessionID: String
    var adID: String
    var snapshotID: String?
    var position: Int?
    var visibility: Visibility?
    /// The device's wall clock at the call, in milliseconds since 1970.
    var deviceTimeMilliseconds: Int64
    /// The device-to-server clock correction known at the call; nil when none was known yet, and then
    /// the batch that carries the event supplies one.
    var correctionMilliseconds: Int64?

    /// `occurred_at` in milliseconds since 1970 on the server's clock, as well as the tracker knows it.
    func occurredAtMilliseconds(batchCorrection: Int64?) -> Int64 {
        deviceTimeMilliseconds + (correctionMilliseconds ?? batchCorrection ?? 0)
    }
}
