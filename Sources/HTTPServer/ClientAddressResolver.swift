import HTTP

/// Who the client is (API.md, "The client address"): the TCP peer, unless the peer is a trusted
/// proxy (`ADTALLY_TRUSTED_PROXIES`); then the right-most address of the `X-Forwarded-For` headers
/// (all of them, in order) that is not itself trusted, or the left-most when every one is. A
/// missing or malformed `X-Forwarded-For` from a trusted peer falls back to the peer; an untrusted
/// peer's header is ignored (anyone can write one). Limits and traffic filters key on this.
public struct ClientAddressResolver: Sendable {
    public let trusted: AddressRanges

    public init(trusted: AddressRanges) {
        self.trusted = trusted
    }

    /// The client of a request from `peer` with `headers`; nil when the peer is unknown.
    public func client(peer: IPAddress?, headers: HTTPHeaders) -> IPAddress? {
        guard let peer else { return nil }
        guard !trusted.isEmpty, trusted.contains(peer) else { return peer }
        let values = headers.values(for: "X-Forwarded-For")
        guard !values.isEmpty else { return peer }
        var chain: [IPAddress] = []
        for value in values {
            // Split and trimmed as bytes (a split by `Character` and Foundation's trimming were
            // most of this function's cost, on every request): commas, and around each element
            // HTTP's optional whitespace, which is spaces and tabs only (RFC 9110, 5.6.3).
            for element in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                var text = element
                while let first = text.first, first == 0x20 || first == 0x09 { text = text.dropFirst() }
                while let last = text.last, last == 0x20 || last == 0x09 { text = text.dropLast() }
                // One element that is not an address makes the whole header untrustworthy.
                guard let address = IPAddress(Substring(text)) else { return peer }
                chain.append(address)
            }
        }
        guard let first = chain.first else { return peer }
        return chain.last { !trusted.contains($0) } ?? first
    }
}
