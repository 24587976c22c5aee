import Contract
import JSON

/// The body of `POST /v1/advertisers/{advertiser_id}/keys` (API.md section 13), read and validated
/// once: `name`, 1 to 100 characters without control characters (required); `scopes`, a non-empty
/// array of `reports` and `conversions` without repeats (absent or `null`: both). Checked in that
/// order, the first failure answering `400 invalid_key_request` with the member in `field`;
/// unknown members are ignored.
public struct KeyRequest: Sendable, Equatable {
    public var name: String
    public var scopes: AdvertiserKey.Scopes

    /// The longest `name`, in characters.
    public static let maximumNameLength = 100

    public init(name: String, scopes: AdvertiserKey.Scopes = .all) {
        self.name = name
        self.scopes = scopes
    }

    /// Why a body was refused: not a JSON object (`malformed_json`), or one that breaks a rule.
    public enum DecodingError: Error, Sendable, Equatable {
        case malformedJSON(String)
        case invalid(field: String, message: String)
    }

    public static func decode(body: [UInt8]) throws(DecodingError) -> KeyRequest {
        let members: [String: JSONValue]
        do {
            members = try JSONParser.objectMembers(body)
        } catch {
            throw .malformedJSON(error.message)
        }
        let nameRule = "name must be a string of 1 to \(maximumNameLength) characters without control characters"
        guard let value = members["name"], !value.isNull else { throw .invalid(field: "name", message: "name is required: \(nameRule).") }
        guard case .string(let name) = value, (1...maximumNameLength).contains(name.count),
              !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalid(field: "name", message: "\(nameRule).")
        }
        guard let scopesValue = members["scopes"], !scopesValue.isNull else { return KeyRequest(name: name) }
        let scopesRule = "scopes must be a non-empty array of \"reports\" and \"conversions\", each at most once"
        guard case .array(let elements) = scopesValue, !elements.isEmpty else { throw .invalid(field: "scopes", message: "\(scopesRule).") }
        var names: [String] = []
        for element in elements {
            guard case .string(let scope) = element, !names.contains(scope) else { throw .invalid(field: "scopes", message: "\(scopesRule).") }
            names.append(scope)
        }
        guard let scopes = AdvertiserKey.Scopes(names: names) else { throw .invalid(field: "scopes", message: "\(scopesRule).") }
        return KeyRequest(name: name, scopes: scopes)
    }
}
