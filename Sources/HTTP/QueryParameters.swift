/// The decoded query string, in order and with duplicates kept, because callers must be able to tell
/// "a known parameter given twice" from "given once" (`400 invalid_query` in API.md).
public struct QueryParameters: Sendable, Sequence, Equatable {
    /// One `name=value` pair; a pair without `=` has an empty value.
    public struct Parameter: Sendable, Equatable {
        public let name: String
        public let value: String
        /// A decoded pair.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Every pair in order of appearance.
    public let parameters: [Parameter]

    /// Pairs already decoded.
    public init(_ parameters: [Parameter] = []) { self.parameters = parameters }

    /// Decodes a raw query string (without the `?`): pairs split on `&`, names and values
    /// `+`-to-space and `%XX` decoded. Empty pieces (`a=1&&b=2`) are skipped. Returns nil on malformed
    /// percent-encoding. Bytes that are not UTF-8 after decoding become U+FFFD, so the value will fail
    /// any identifier check downstream rather than being silently mangled into a valid one.
    public init?(decoding raw: Substring) {
        var result: [Parameter] = []
        for piece in raw.split(separator: "&", omittingEmptySubsequences: true) {
            let name: Substring
            let value: Substring
            if let eq = piece.firstIndex(of: "=") {
                name = piece[..<eq]
                value = piece[piece.index(after: eq)...]
            } else {
                name = piece
                value = ""
            }
            guard let n = PercentDecoding.decode(name.utf8, plusAsSpace: true),
                  let v = PercentDecoding.decode(value.utf8, plusAsSpace: true)
            else { return nil }
            result.append(Parameter(name: String(decoding: n, as: UTF8.self), value: String(decoding: v, as: UTF8.self)))
        }
        parameters = result
    }

    /// Every value given for `name`, in order; more than one means the parameter was repeated.
    public func values(for name: String) -> [String] {
        parameters.filter { $0.name == name }.map(\.value)
    }

    /// The first value given for `name`.
    public subscript(name: String) -> String? { parameters.first { $0.name == name }?.value }

    public var count: Int { parameters.count }
    public var isEmpty: Bool { parameters.isEmpty }

    public func makeIterator() -> IndexingIterator<[Parameter]> { parameters.makeIterator() }
}
