/// Rule 1 of section 2 ("well-formed") for one event object.
///
/// Members are checked in the contract's order: `event_id`, `type`, `session_id`, `ad_id`,
/// `occurred_at`, `snapshot_id`, `position`, `visible_fraction`, `visible_ms`; a missing member fails
/// at its place in that order, and an optional member sent as `null` counts as absent. For a click
/// the visibility members are ignored entirely (not even type-checked). For an impression they come
/// as a pair: `visible_fraction` alone fails at `visible_ms`, `visible_ms` alone fails at
/// `visible_fraction` (the missing one). Numbers: `visible_fraction` is any JSON number 0…1 (`1`,
/// `0`, `-0`, `1e0`, `0.5e0` are all fine; `1e400` is not finite and fails); `position` and
/// `visible_ms` must be JSON integers without fraction or exponent (`1000.0`, `1e3` fail).
enum EventRule {
    static func check(_ event: [String: JSONValue], now: Timestamp) -> EventCandidate {
        check(EventMembers(event), now: now)
    }

    static func check(_ event: EventMembers, now: Timestamp) -> EventCandidate {
        let sentID = event.eventID?.stringValue
        let eventID = sentID.flatMap(EventID.canonical)
        let type = event.type?.stringValue.flatMap(EventType.init(rawValue:))

        func invalid(_ field: String) -> EventCandidate {
            .invalid(echoID: eventID ?? sentID, field: field, typeForMetrics: type)
        }

        guard let eventID else { return invalid("event_id") }
        guard let type else { return invalid("type") }
        guard let sessionID = requiredIdentifier(event.sessionID) else { return invalid("session_id") }
        guard let adID = requiredIdentifier(event.adID) else { return invalid("ad_id") }
        guard let text = event.occurredAt?.stringValue, let occurredAt = Timestamp(rfc3339: text),
              occurredAt >= now.adding(microseconds: -EventInput.maximumAgeMicroseconds),
              occurredAt <= now.adding(microseconds: EventInput.maximumLeadMicroseconds)
        else { return invalid("occurred_at") }

        var snapshotID: String?
        if let value = present(event.snapshotID) {
            guard let text = value.stringValue, Identifier.isWellFormed(text) else { return invalid("snapshot_id") }
            snapshotID = text
        }

        var position: Int32?
        if let value = present(event.position) {
            guard let integer = value.numberValue?.int64, integer >= 0, integer <= Int64(Int32.max)
            else { return invalid("position") }
            position = Int32(integer)
        }

        var visibility: Visibility?
        if type == .impression {
            let fractionValue = present(event.visibleFraction)
            let millisecondsValue = present(event.visibleMilliseconds)
            switch (fractionValue, millisecondsValue) {
            case (nil, nil):
                break
            case (nil, _?):
                return invalid("visible_fraction")
            case (let fractionValue?, let millisecondsValue):
                guard let fraction = fractionValue.numberValue?.double, fraction >= 0, fraction <= 1
                else { return invalid("visible_fraction") }
                guard let millisecondsValue,
                      let milliseconds = millisecondsValue.numberValue?.int64,
                      milliseconds >= 0, milliseconds <= EventInput.maximumVisibleMilliseconds
                else { return invalid("visible_ms") }
                // `+ 0` turns `-0` into `0`, so stored and compared values never carry a sign.
                visibility = Visibility(fraction: fraction + 0, milliseconds: Int32(milliseconds))
            }
        }

        return .valid(EventInput(eventID: eventID, type: type, sessionID: sessionID, adID: adID,
                                 occurredAt: occurredAt, snapshotID: snapshotID, position: position,
                                 visibility: visibility))
    }

    /// The value of an optional member, `nil` when absent or `null`.
    private static func present(_ value: JSONValue?) -> JSONValue? {
        guard let value, !value.isNull else { return nil }
        return value
    }

    private static func requiredIdentifier(_ value: JSONValue?) -> String? {
        guard let text = value?.stringValue, Identifier.isWellFormed(text) else { return nil }
        return text
    }
}

/// The members of an event object that rule 1 reads; `nil` when absent (a member sent as `null` is
/// `.null`). Everything else in the object is ignored.
struct EventMembers {
    var eventID: JSONValue?
    var type: JSONValue?
    var sessionID: JSONValue?
    var adID: JSONValue?
    var occurredAt: JSONValue?
    var snapshotID: JSONValue?
    var position: JSONValue?
    var visibleFraction: JSONValue?
    var visibleMilliseconds: JSONValue?

    init() {}

    init(_ object: [String: JSONValue]) {
        eventID = object["event_id"]
        type = object["type"]
        sessionID = object["session_id"]
        adID = object["ad_id"]
        occurredAt = object["occurred_at"]
        snapshotID = object["snapshot_id"]
        position = object["position"]
        visibleFraction = object["visible_fraction"]
        visibleMilliseconds = object["visible_ms"]
    }
}
