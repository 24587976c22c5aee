import Contract
import JSON
import Timestamps

/// The body of `POST /v1/adjustments` (API.md section 10), read and validated once.
///
/// Members are checked in this order, the first failure answering `400 invalid_adjustment` with
/// the member in `field`: `adjustment_id`, `reason`, `note`, `from`, `to`, `session_ids`, `ad_ids`,
/// `advertiser_id`, then the rules between them (`from` before `to`, field `to`; at least one
/// filter, field `session_ids`). An optional member sent as `null` is absent; unknown members are
/// ignored. The rules that need the database (`to` at or before `final_before`, `from` at or after
/// the retention horizon) are `AdjustmentStore`'s.
///
/// Two requests are the same adjustment when their `canonical` forms are equal: the same reason,
/// note, instants (to the microsecond, whatever the offset they were written with) and filters,
/// with each list of ids read as a set (order and repeats do not matter).
public struct AdjustmentRequest: Sendable, Equatable {
    /// Why events are credited.
    public enum Reason: String, Sendable, CaseIterable {
        case sivt
        case advertiserDispute = "advertiser_dispute"
        case operatorError = "operator_error"
    }

    public var adjustmentID: String
    public var reason: Reason
    public var note: String?
    /// Inclusive lower bound on the credited events' `received_at`.
    public var from: Timestamp
    /// Exclusive upper bound.
    public var to: Timestamp
    /// Sorted, without repeats; nil when not given.
    public var sessionIDs: [String]?
    public var adIDs: [String]?
    public var advertiserID: String?

    /// The longest `note`, in characters.
    public static let maximumNoteLength = 500
    /// The most ids in `session_ids` or `ad_ids`.
    public static let maximumFilterIDs = 1_000
    /// What an identifier must be, in messages.
    static let identifierForm = "1 to \(Identifier.maximumLength) characters from A-Z a-z 0-9 . _ : ~ -"

    /// `400 invalid_adjustment`: the member to blame and a message for a human.
    public struct Invalid: Error, Sendable, Equatable {
        public let field: String
        public let message: String
    }

    /// Why a body was refused: not JSON (`malformed_json`), or JSON that breaks a rule.
    public enum DecodingError: Error, Sendable, Equatable {
        case malformedJSON(String)
        case invalid(Invalid)
    }

    public init(adjustmentID: String, reason: Reason, note: String? = nil, from: Timestamp, to: Timestamp,
                sessionIDs: [String]? = nil, adIDs: [String]? = nil, advertiserID: String? = nil) {
        self.adjustmentID = adjustmentID
        self.reason = reason
        self.note = note
        self.from = from
        self.to = to
        self.sessionIDs = sessionIDs.map { Self.normalised($0) }
        self.adIDs = adIDs.map { Self.normalised($0) }
        self.advertiserID = advertiserID
    }

    /// Decodes a request body (see the type's comment for the order of the checks).
    public static func decode(body: [UInt8]) throws(DecodingError) -> AdjustmentRequest {
        let members: [String: JSONValue]
        do {
            members = try JSONParser.objectMembers(body)
        } catch {
            throw .malformedJSON(error.message)
        }
        do throws(Invalid) {
            return try decode(members)
        } catch {
            throw .invalid(error)
        }
    }

    private static func decode(_ members: [String: JSONValue]) throws(Invalid) -> AdjustmentRequest {
        guard let adjustmentID = try optionalString(members, "adjustment_id") else {
            throw Invalid(field: "adjustment_id", message: "adjustment_id is required: \(identifierForm).")
        }
        guard Identifier.isWellFormed(adjustmentID) else {
            throw Invalid(field: "adjustment_id", message: "adjustment_id must be \(identifierForm).")
        }
        let reasons = Reason.allCases.map(\.rawValue).joined(separator: ", ")
        guard let rawReason = try optionalString(members, "reason") else {
            throw Invalid(field: "reason", message: "reason is required: one of \(reasons).")
        }
        guard let reason = Reason(rawValue: rawReason) else {
            throw Invalid(field: "reason", message: "reason must be one of \(reasons).")
        }
        let note = try optionalString(members, "note")
        if let note, note.count > maximumNoteLength {
            throw Invalid(field: "note", message: "note has \(note.count) characters; at most \(maximumNoteLength) are allowed.")
        }
        let from = try instant(members, "from")
        let to = try instant(members, "to")
        let sessionIDs = try identifiers(members, "session_ids")
        let adIDs = try identifiers(members, "ad_ids")
        let advertiserID = try optionalString(members, "advertiser_id")
        if let advertiserID, !Identifier.isWellFormed(advertiserID) {
            throw Invalid(field: "advertiser_id", message: "advertiser_id must be \(identifierForm).")
        }
        guard from < to else {
            throw Invalid(field: "to", message: "to must be after from (events received in [from, to) are credited).")
        }
        guard sessionIDs != nil || adIDs != nil || advertiserID != nil else {
            throw Invalid(field: "session_ids", message: "Give at least one filter: session_ids, ad_ids or advertiser_id.")
        }
        return AdjustmentRequest(adjustmentID: adjustmentID, reason: reason, note: note, from: from, to: to,
                                 sessionIDs: sessionIDs, adIDs: adIDs, advertiserID: advertiserID)
    }

    private static func optionalString(_ members: [String: JSONValue], _ name: String) throws(Invalid) -> String? {
        guard let value = members[name], !value.isNull else { return nil }
        guard case .string(let text) = value else { throw Invalid(field: name, message: "\(name) must be a string.") }
        return text
    }

    private static func instant(_ members: [String: JSONValue], _ name: String) throws(Invalid) -> Timestamp {
        let expected = "an RFC 3339 time with an offset, such as 2026-11-29T13:47:00Z"
        guard let text = try optionalString(members, name) else {
            throw Invalid(field: name, message: "\(name) is required: \(expected).")
        }
        guard let time = Timestamp(rfc3339: text) else { throw Invalid(field: name, message: "\(name) must be \(expected).") }
        return time
    }

    private static func identifiers(_ members: [String: JSONValue], _ name: String) throws(Invalid) -> [String]? {
        guard let value = members[name], !value.isNull else { return nil }
        let expected = "an array of 1 to \(maximumFilterIDs) identifiers (\(identifierForm))"
        guard case .array(let elements) = value, !elements.isEmpty, elements.count <= maximumFilterIDs else {
            throw Invalid(field: name, message: "\(name) must be \(expected).")
        }
        var ids: [String] = []
        ids.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            guard case .string(let id) = element, Identifier.isWellFormed(id) else {
                throw Invalid(field: "\(name)[\(index)]", message: "\(name)[\(index)] must be \(identifierForm).")
            }
            ids.append(id)
        }
        return ids
    }

    private static func normalised(_ ids: [String]) -> [String] {
        Array(Set(ids)).sorted { $0.utf8Precedes($1) }
    }

    /// The request as stored beside the adjustment, to tell a repeat from a conflict.
    public var canonical: String {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("reason"); writer.string(reason.rawValue)
        writer.key("note"); writer.string(note)
        writer.key("from"); writer.int(from.microsecondsSinceEpoch)
        writer.key("to"); writer.int(to.microsecondsSinceEpoch)
        writer.key("session_ids"); Self.write(sessionIDs, to: &writer)
        writer.key("ad_ids"); Self.write(adIDs, to: &writer)
        writer.key("advertiser_id"); writer.string(advertiserID)
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    private static func write(_ ids: [String]?, to writer: inout JSONWriter) {
        guard let ids else { writer.null(); return }
        writer.beginArray()
        for id in ids { writer.string(id) }
        writer.endArray()
    }
}
