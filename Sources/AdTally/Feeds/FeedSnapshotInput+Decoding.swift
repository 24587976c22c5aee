import Contract
import JSON

/// Decoding a feed snapshot body, first bad field first.
///
/// Members are checked in the contract's order, `snapshot_id`, `ads`, then per ad (in array order)
/// `ad_id`, `position`, `advertiser_id`, `url`; the first failure is the answer. Missing, `null`,
/// wrong type and out of form all fail at that member. A repeated `ad_id` or `position` fails at
/// the later entry, at the point its own member is checked (so `ads[3].ad_id` repeated is reported
/// before a bad `ads[3].position`). Unknown keys are ignored.
extension FeedSnapshotInput {
    /// Why a body is not a snapshot: not JSON or not an object (`400 malformed_json`), or a member
    /// that breaks a rule of section 1 (`422 invalid_snapshot`, naming it).
    public enum Refusal: Error, Sendable, Equatable {
        case malformedJSON(String)
        case invalid(field: String, String)
    }

    /// Decodes and validates a request body: `malformed_json` when it is not JSON or not a JSON
    /// object, else `invalid_snapshot` with `field`, else the snapshot.
    public init(body: [UInt8]) throws(Refusal) {
        let document: JSONValue
        do {
            document = try JSONParser.parse(body)
        } catch {
            throw .malformedJSON("The body is not valid JSON: \(error.description).")
        }
        self = try Self.validated(document)
    }

    /// Validates an already parsed body (see `init(body:)`).
    static func validated(_ document: JSONValue) throws(Refusal) -> FeedSnapshotInput {
        guard case .object(let members) = document else {
            throw .malformedJSON("The body must be a JSON object.")
        }

        let snapshotID = try identifier(members["snapshot_id"], field: "snapshot_id")

        guard let adsValue = members["ads"], !adsValue.isNull else {
            throw .invalid(field: "ads", "ads is required: an array of at most \(maximumAdCount) ads.")
        }
        guard case .array(let entries) = adsValue else {
            throw .invalid(field: "ads", "ads must be an array of at most \(maximumAdCount) ads.")
        }
        guard entries.count <= maximumAdCount else {
            throw .invalid(field: "ads", "ads has \(entries.count) entries; at most \(maximumAdCount) are allowed.")
        }

        var ads: [AdInput] = []
        ads.reserveCapacity(entries.count)
        var seenAdIDs = Set<String>(minimumCapacity: entries.count)
        var seenPositions = Set<Int32>(minimumCapacity: entries.count)
        for (index, entry) in entries.enumerated() {
            let path = "ads[\(index)]"
            guard case .object(let ad) = entry else {
                throw .invalid(field: path, "\(path) must be a JSON object.")
            }
            let adID = try identifier(ad["ad_id"], field: "\(path).ad_id")
            guard seenAdIDs.insert(adID).inserted else {
                throw .invalid(field: "\(path).ad_id", "\(path).ad_id repeats an ad_id of an earlier entry; ad_id must be unique in a snapshot.")
            }
            let position = try position(ad["position"], field: "\(path).position")
            guard seenPositions.insert(position).inserted else {
                throw .invalid(field: "\(path).position", "\(path).position repeats the position of an earlier entry; positions must be unique in a snapshot.")
            }
            let advertiserID = try identifier(ad["advertiser_id"], field: "\(path).advertiser_id")
            let url = try landingURL(ad["url"], field: "\(path).url")
            ads.append(AdInput(adID: adID, position: position, advertiserID: advertiserID, url: url))
        }
        return FeedSnapshotInput(snapshotID: snapshotID, ads: ads)
    }

    private static func requiredString(_ value: JSONValue?, field: String, expected: String) throws(Refusal) -> String {
        guard let value, !value.isNull else {
            throw .invalid(field: field, "\(field) is required: \(expected).")
        }
        guard case .string(let text) = value else {
            throw .invalid(field: field, "\(field) must be a string: \(expected).")
        }
        return text
    }

    private static func identifier(_ value: JSONValue?, field: String) throws(Refusal) -> String {
        let expected = Identifier.form
        let text = try requiredString(value, field: field, expected: expected)
        guard Identifier.isWellFormed(text) else {
            throw .invalid(field: field, "\(field) must be \(expected).")
        }
        return text
    }

    private static func position(_ value: JSONValue?, field: String) throws(Refusal) -> Int32 {
        let expected = "an integer from 0 to 2147483647"
        guard let value, !value.isNull else {
            throw .invalid(field: field, "\(field) is required: \(expected).")
        }
        guard case .number(let number) = value, let integer = number.int64,
              integer >= 0, integer <= Int64(Int32.max)
        else {
            throw .invalid(field: field, "\(field) must be \(expected), written without a fraction or exponent.")
        }
        return Int32(integer)
    }

    private static func landingURL(_ value: JSONValue?, field: String) throws(Refusal) -> String {
        let expected = "an absolute https URL with a host, at most 2048 ASCII bytes, without user info, spaces or control characters"
        let text = try requiredString(value, field: field, expected: expected)
        guard LandingURL.isAcceptable(text) else {
            throw .invalid(field: field, "\(field) must be \(expected).")
        }
        return text
    }
}
