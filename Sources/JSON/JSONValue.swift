/// A parsed JSON document, as `JSONParser` produces it and `JSONWriter` can write it.
///
/// Objects are a dictionary because every reader of request bodies looks members up by name and
/// ignores unknown ones; member order carries no meaning in RFC 8259. A repeated key keeps the
/// last value (the contract allows either refusing or last-wins; last-wins is what most clients'
/// serializers assume). Keys compare as Swift `String`s, i.e. by canonical equivalence; every key
/// AdTally reads is ASCII, for which that is plain byte equality.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// Kept as its lexeme so that no number, however large, can trap or silently round.
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    /// The member `key` of an object; `nil` when absent or when `self` is not an object.
    /// A member sent as `null` is `.null` here, so callers can tell "null" from "absent".
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The string, when `self` is a JSON string.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The number, when `self` is a JSON number.
    public var numberValue: JSONNumber? {
        if case .number(let number) = self { return number }
        return nil
    }

    /// Whether `self` is JSON `null`: the contract treats an optional member sent as `null` as absent.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}
