import JSON

extension JSONValue {
    /// The elements, when `self` is a JSON array.
    var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// The members, when `self` is a JSON object.
    var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
}

extension JSONWriter {
    /// The bytes of `value` on its own; object members in key byte order.
    static func serialize(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        writer.value(value)
        return writer.bytes
    }
}
