/// Header fields in the order received, with case-insensitive lookup. Kept as a list, not a dictionary,
/// because order and repetition matter (repeated `Content-Length`, `Set-Cookie`, smuggling checks).
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields as sent: name in its original case, value with surrounding whitespace trimmed.
    public private(set) var fields: [(name: String, value: String)]

    /// Headers from a list of fields, kept in order.
    public init(_ fields: [(String, String)] = []) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    /// Headers from fields already in the stored shape (the parser's), without copying the list.
    init(parsed fields: [(name: String, value: String)]) {
        self.fields = fields
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of the field `name` (any case), or nil.
    public subscript(name: String) -> String? {
        for field in fields where field.name.equalsIgnoringASCIICase(name) { return field.value }
        return nil
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.equalsIgnoringASCIICase(name) }.map(\.value)
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Whether the comma-separated list field `name` holds `token` (case-insensitive), as for
    /// `Connection: keep-alive, Upgrade`.
    public func containsToken(_ token: String, in name: String) -> Bool {
        for field in fields where field.name.equalsIgnoringASCIICase(name) {
            for element in field.value.split(separator: ",") {
                if element.trimmingOWS().equalsIgnoringASCIICase(token) { return true }
            }
        }
        return false
    }

    /// Appends a field, keeping any existing ones of that name.
    public mutating func add(name: String, value: String) { fields.append((name: name, value: value)) }

    /// Replaces every field of that name by one field.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    /// Removes every field of that name.
    public mutating func remove(name: String) { fields.removeAll { $0.name.equalsIgnoringASCIICase(name) } }

    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }
}

extension StringProtocol {
    /// ASCII case-insensitive comparison: header names and tokens are ASCII, and this avoids the
    /// Unicode case mapping (and allocation) of `lowercased()`.
    public func equalsIgnoringASCIICase(_ other: some StringProtocol) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where x != y {
            let lx = (x >= 0x41 && x <= 0x5A) ? x | 0x20 : x
            let ly = (y >= 0x41 && y <= 0x5A) ? y | 0x20 : y
            if lx != ly { return false }
        }
        return true
    }

    /// The string without leading and trailing spaces and tabs (HTTP's optional whitespace).
    func trimmingOWS() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}
