/// Whole-document reading of JSON over the one tokenizer (`JSONTokenizer`): `parse` builds a
/// `JSONValue` tree, `scanMember` says what a top-level member holds without building anything.
/// Both fail exactly where the tokenizer does. A repeated object key keeps its last value.
public enum JSONParser {
    /// Deep enough for any real request, shallow enough for the tree's recursion (`JSONTokenizer`).
    public static let defaultMaximumDepth = JSONTokenizer.defaultMaximumDepth

    /// Parses a whole body.
    public static func parse(_ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var tokenizer = JSONTokenizer(bytes: buffer, maximumDepth: maximumDepth)
            return Result { () throws(JSONParseError) in try document(&tokenizer) }
        }
        return try result.get()
    }

    /// Why a body that must be one JSON object is not: the sentence of a `malformed_json` answer.
    public struct NotAnObject: Error, Sendable, Equatable {
        public let message: String
    }

    /// The members of a body that must be one JSON object (a request of the admin's or a key's
    /// endpoints), or why it is not.
    public static func objectMembers(_ bytes: [UInt8]) throws(NotAnObject) -> [String: JSONValue] {
        let document: JSONValue
        do {
            document = try parse(bytes)
        } catch {
            throw NotAnObject(message: "The body is not valid JSON: \(error.description).")
        }
        guard case .object(let members) = document else { throw NotAnObject(message: "The body must be a JSON object.") }
        return members
    }

    /// The value whose first token `tokenizer` reads next, built whole, and then the end of the
    /// text.
    static func document(_ tokenizer: inout JSONTokenizer) throws(JSONParseError) -> JSONValue {
        let value = try JSONParser.value(&tokenizer)
        // After the value, `next` answers `.end` or throws for what follows it.
        _ = try tokenizer.next()
        return value
    }

    /// An open array or object while a tree is built. Mutated in place so appends stay amortised O(1).
    private struct Frame {
        var isObject: Bool
        var elements: [JSONValue] = []
        var members: [String: JSONValue] = [:]
        var pendingKey: String = ""
    }

    /// The value whose first token `tokenizer` reads next, built whole (iteratively: the depth is the
    /// tokenizer's to limit, not the call stack's).
    public static func value(_ tokenizer: inout JSONTokenizer) throws(JSONParseError) -> JSONValue {
        var stack: [Frame] = []
        while true {
            var value: JSONValue
            switch try tokenizer.next() {
            case .beginObject:
                // Room for a typical event (nine members) up front: growing 1, 2, 4, 8, 16 rehashes every key.
                stack.append(Frame(isObject: true, members: Dictionary(minimumCapacity: 12)))
                continue
            case .beginArray:
                stack.append(Frame(isObject: false))
                continue
            case .key(let text):
                // Keys come only inside an object, which is on the stack.
                stack[stack.count - 1].pendingKey = tokenizer.string(text)
                continue
            case .endObject, .endArray:
                // The tokenizer pairs every end with its beginning: the stack holds it.
                let closed = stack.removeLast()
                value = closed.isObject ? .object(closed.members) : .array(closed.elements)
            case .string(let text): value = .string(tokenizer.string(text))
            case .number(let lexeme): value = .number(tokenizer.number(lexeme))
            case .bool(let flag): value = .bool(flag)
            case .null: value = .null
            case .end:
                // `next` hands out `.end` only after a complete value, which returned before.
                preconditionFailure("JSONParser.value read past its value")
            }
            guard !stack.isEmpty else { return value }
            let top = stack.count - 1
            if stack[top].isObject {
                stack[top].members[stack[top].pendingKey] = value
            } else {
                stack[top].elements.append(value)
            }
        }
    }

    /// What a body's top level holds under one member name, as `scanMember` finds it.
    public enum MemberScan: Sendable, Equatable {
        /// The document is valid JSON but not an object.
        case notAnObject
        /// An object without that member.
        case absent
        /// An object whose member (its last occurrence: a repeated key keeps the last value, as in
        /// `parse`) is an array of `count` elements.
        case array(count: Int)
        /// An object whose member is something other than an array.
        case notAnArray
    }

    /// Checks a whole body exactly as `parse` does (the same errors, at the same bytes) and says
    /// what its top-level object holds under `key`, without building the document: only keys with
    /// escapes are decoded. What the events bucket uses to price a batch it may refuse.
    public static func scanMember(_ key: StaticString, in bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(JSONParseError) -> MemberScan {
        let result: Result<MemberScan, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var tokenizer = JSONTokenizer(bytes: buffer, maximumDepth: maximumDepth)
            return Result { () throws(JSONParseError) in try scan(key, &tokenizer) }
        }
        return try result.get()
    }

    private static func scan(_ wanted: StaticString, _ tokenizer: inout JSONTokenizer) throws(JSONParseError) -> MemberScan {
        let first = try tokenizer.next()
        guard first == .beginObject else {
            // Not an object: the rest of the text is still checked, so that the errors are parse's.
            try tokenizer.skipRest(of: first)
            _ = try tokenizer.next()
            return .notAnObject
        }
        var found: MemberScan = .absent
        while case .key(let name) = try tokenizer.next() {
            guard tokenizer.equals(name, wanted) else {
                try tokenizer.skipValue()
                continue
            }
            found = try elements(&tokenizer)
        }
        // The object ended: only `.end` may follow.
        _ = try tokenizer.next()
        return found
    }

    /// How many elements the array that comes next has, or `.notAnArray`.
    private static func elements(_ tokenizer: inout JSONTokenizer) throws(JSONParseError) -> MemberScan {
        let first = try tokenizer.next()
        guard first == .beginArray else {
            try tokenizer.skipRest(of: first)
            return .notAnArray
        }
        var count = 0
        // Each element in turn, until the array's end comes where an element would.
        while try tokenizer.skipValue() != .endArray {
            count += 1
        }
        return .array(count: count)
    }
}
