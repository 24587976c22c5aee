import Contract
import JSON
import Timestamps

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
///
/// A failure also says, for a human, what is wrong with that member (`WellFormedRule.Message`): the
/// field alone does not tell an `occurred_at` from 2020 from one with a space separator.
enum WellFormedRule {
    static func check(_ event: EventMembers, now: Timestamp) -> EventCandidate {
        let sentID = event.eventID?.stringValue
        let eventID = sentID.flatMap(EventID.canonical)
        let type = event.type?.stringValue.flatMap(EventType.init(rawValue:))

        func invalid(_ field: String, _ message: String) -> EventCandidate {
            .invalid(echoID: eventID ?? sentID, field: field, message: message, typeForMetrics: type)
        }

        guard let eventID else {
            return invalid("event_id", Message.required("event_id", event.eventID) ?? Message.eventIDForm)
        }
        guard let type else { return invalid("type", Message.required("type", event.type) ?? Message.typeValue) }
        guard let sessionID = requiredIdentifier(event.sessionID) else {
            return invalid("session_id", Message.required("session_id", event.sessionID) ?? Message.identifierForm("session_id"))
        }
        guard let adID = requiredIdentifier(event.adID) else {
            return invalid("ad_id", Message.required("ad_id", event.adID) ?? Message.identifierForm("ad_id"))
        }
        guard let text = event.occurredAt?.stringValue, let occurredAt = Timestamp(rfc3339: text) else {
            return invalid("occurred_at", Message.required("occurred_at", event.occurredAt) ?? Message.timestampForm)
        }
        guard occurredAt >= now.adding(microseconds: -EventInput.maximumAgeMicroseconds) else {
            return invalid("occurred_at", Message.tooOld)
        }
        guard occurredAt <= now.adding(microseconds: EventInput.maximumLeadMicroseconds) else {
            return invalid("occurred_at", Message.tooFarAhead)
        }

        var snapshotID: String?
        if let value = present(event.snapshotID) {
            guard let text = value.stringValue, Identifier.isWellFormed(text) else {
                return invalid("snapshot_id", Message.required("snapshot_id", value) ?? Message.identifierForm("snapshot_id"))
            }
            snapshotID = text
        }

        var position: Int32?
        if let value = present(event.position) {
            guard let integer = value.numberValue?.int64, integer >= 0, integer <= Int64(Int32.max)
            else { return invalid("position", Message.position) }
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
                return invalid("visible_fraction", Message.halfPair(missing: "visible_fraction", given: "visible_ms"))
            case (let fractionValue?, let millisecondsValue):
                guard let fraction = fractionValue.numberValue?.double, fraction >= 0, fraction <= 1
                else { return invalid("visible_fraction", Message.visibleFraction) }
                guard let millisecondsValue else {
                    return invalid("visible_ms", Message.halfPair(missing: "visible_ms", given: "visible_fraction"))
                }
                guard let milliseconds = millisecondsValue.numberValue?.int64,
                      milliseconds >= 0, milliseconds <= EventInput.maximumVisibleMilliseconds
                else { return invalid("visible_ms", Message.visibleMilliseconds) }
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

    /// The `message` of a rule-1 result: one sentence per member and way of failing, naming the
    /// member first, so that a developer reading a response (or a log) sees what to fix.
    enum Message {
        /// A member that is absent, `null` or not a string where a string belongs; nil when it is
        /// a string (then its form is wrong, which the caller says).
        static func required(_ name: String, _ value: JSONValue?) -> String? {
            guard let value else { return "\(name) is missing" }
            if value.isNull { return "\(name) is null" }
            return value.stringValue == nil ? "\(name) must be a string" : nil
        }

        static let eventIDForm = "event_id is not a UUID in canonical form (8-4-4-4-12 hexadecimal digits)"
        static let typeValue = "type must be impression or click"
        static func identifierForm(_ name: String) -> String {
            "\(name) must be 1 to \(Identifier.maximumLength) characters from A-Z a-z 0-9 . _ : ~ -"
        }
        static let timestampForm = "occurred_at is not an RFC 3339 timestamp with an offset"
        static let tooOld = "occurred_at is older than \(EventInput.maximumAgeMicroseconds / 86_400_000_000) days"
        static let tooFarAhead = "occurred_at is more than \(EventInput.maximumLeadMicroseconds / 60_000_000) minutes ahead of the server clock"
        static let position = "position must be a JSON integer from 0 to \(Int32.max)"
        static let visibleFraction = "visible_fraction must be a number from 0 to 1"
        static let visibleMilliseconds = "visible_ms must be a JSON integer from 0 to \(EventInput.maximumVisibleMilliseconds)"
        static func halfPair(missing: String, given: String) -> String {
            "\(missing) is missing; an impression with \(given) needs both visibility fields"
        }
        /// A batch entry that is a number, string, array or `null` rather than an event.
        static let notAnObject = "the batch entry is not a JSON object"
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
}
