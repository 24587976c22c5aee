/// The contract's error body, `{"error": {"code": …, "message": …, "field": …}}`, written in one
/// place so every refusal (input, HTTP, database) has the same shape; `field` only when one field
/// is to blame.
extension JSONWriter {
    /// The complete error body for `code`, `message` and optionally `field`.
    public static func errorBody(code: String, message: String, field: String? = nil) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 64 + message.utf8.count)
        writer.beginObject()
        writer.key("error")
        writer.beginObject()
        writer.key("code")
        writer.string(code)
        writer.key("message")
        writer.string(message)
        if let field {
            writer.key("field")
            writer.string(field)
        }
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    /// Writes a timestamp in the contract's output form (UTC, `Z`, milliseconds), or `null`.
    public mutating func timestamp(_ value: Timestamp?) {
        if let value { string(value.rfc3339) } else { null() }
    }
}

extension InputError {
    /// This error as the contract's error body (the HTTP layer adds the status: `malformed_json`
    /// is 400, `invalid_snapshot` is 422).
    public var body: [UInt8] {
        JSONWriter.errorBody(code: code.rawValue, message: message, field: field)
    }
}
