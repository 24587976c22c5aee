import Foundation

/// A set of IPv4 and IPv6 addresses and CIDR ranges (`ADTALLY_TRUSTED_PROXIES`, the blocked-address
/// list), kept as sorted, disjoint ranges of the 128-bit address space (IPv4 as IPv4-mapped IPv6),
/// so that a lookup is one binary search whatever the list's size: a list of 10,000 ranges costs
/// about 14 comparisons per request.
public struct AddressRanges: Sendable, Equatable {
    /// Starts of the ranges, ascending; `ends[i]` is the last address of the range starting at `starts[i]`.
    private var starts: [UInt128] = []
    private var ends: [UInt128] = []
    /// How many entries it was made from (a log line says it after a reload).
    public private(set) var entryCount = 0

    /// The empty set.
    public init() {}

    /// The set of `ranges`, merged where they touch or overlap.
    public init(_ ranges: [ClosedRange<UInt128>]) {
        entryCount = ranges.count
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = ends.last, range.lowerBound <= last || (last < .max && range.lowerBound == last + 1) {
                ends[ends.count - 1] = Swift.max(last, range.upperBound)
            } else {
                starts.append(range.lowerBound)
                ends.append(range.upperBound)
            }
        }
    }

    public var isEmpty: Bool { starts.isEmpty }

    /// Whether `address` lies in one of the ranges.
    public func contains(_ address: IPAddress) -> Bool {
        // The last range starting at or before the address, then whether it reaches it.
        var low = 0, high = starts.count
        while low < high {
            let middle = (low + high) / 2
            if starts[middle] <= address.value { low = middle + 1 } else { high = middle }
        }
        return low > 0 && address.value <= ends[low - 1]
    }

    /// One entry: an address (`192.0.2.1`, `2001:db8::1`) or a CIDR range (`192.0.2.0/24`,
    /// `2001:db8::/32`; host bits past the prefix are ignored, as routers read them); nil for
    /// anything else.
    public static func range(_ entry: some StringProtocol) -> ClosedRange<UInt128>? {
        let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        guard parts.count == 2 else { return address.value...address.value }
        let digits = parts[1]
        guard !digits.isEmpty, digits.count <= 3, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let bits = Int(digits) else { return nil }
        // An IPv4 prefix counts within the mapped /96.
        let prefix = address.isIPv4 && !parts[0].contains(":") ? 96 + bits : bits
        guard bits >= 0, prefix <= 128, !(address.isIPv4 && !parts[0].contains(":") && bits > 32) else { return nil }
        let hostBits = 128 - prefix
        let mask: UInt128 = hostBits == 128 ? .max : (hostBits == 0 ? 0 : (UInt128(1) << hostBits) - 1)
        let start = address.value & ~mask
        return start...(start | mask)
    }

    /// The set of a comma-separated list (an environment variable): surrounding spaces trimmed,
    /// empty entries ignored. Throws the first bad entry's text.
    public static func parse(list text: String) throws(BadEntry) -> AddressRanges {
        var ranges: [ClosedRange<UInt128>] = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: true) {
            let trimmed = entry.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty else { continue }
            guard let range = range(trimmed) else { throw BadEntry(line: nil, text: trimmed) }
            ranges.append(range)
        }
        return AddressRanges(ranges)
    }

    /// The set of a file's lines: one address or range a line; blank lines and `#` comments ignored
    /// (a `#` after an entry starts a comment too). Throws the first bad line with its number.
    public static func parse(lines text: String) throws(BadEntry) -> AddressRanges {
        var ranges: [ClosedRange<UInt128>] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = line.prefix { $0 != "#" }.trimmingCharacters(in: .whitespaces)
            guard !content.isEmpty else { continue }
            guard let range = range(content) else { throw BadEntry(line: number + 1, text: String(line.prefix(80))) }
            ranges.append(range)
        }
        return AddressRanges(ranges)
    }

    /// An entry that is neither an address nor a CIDR range.
    public struct BadEntry: Error {
        /// Its line in a file (1-based), nil in a list.
        public let line: Int?
        public let text: String
    }
}
