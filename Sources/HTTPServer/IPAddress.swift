import Glibc

/// An IPv4 or IPv6 address, as a connection's peer or as text from a header or a list. IPv4 is
/// kept as its IPv4-mapped IPv6 form (`::ffff:a.b.c.d`), so that an IPv4 peer seen through an IPv6
/// socket and the same address written as IPv4 are one address, and one 128-bit space orders them
/// all (API.md: "IPv4-mapped IPv6 addresses count as IPv4").
public struct IPAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The address as an unsigned 128-bit number, network order (IPv4 mapped into `::ffff:0:0/96`).
    public let value: UInt128

    public init(value: UInt128) {
        self.value = value
    }

    /// The IPv4-mapped prefix `::ffff:0:0/96`.
    static let mappedPrefix: UInt128 = 0xFFFF << 32

    /// Whether the address is IPv4 (or IPv4-mapped IPv6, which counts as IPv4).
    public var isIPv4: Bool { value >> 32 == Self.mappedPrefix >> 32 }

    /// An IPv4 address from its four octets' number.
    public init(ipv4: UInt32) {
        value = Self.mappedPrefix | UInt128(ipv4)
    }

    /// The address of a socket address (`AF_INET` or `AF_INET6`), nil for another family.
    public init?(_ storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            self.init(ipv4: UInt32(bigEndian: address.sin_addr.s_addr))
        case AF_INET6:
            let address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            var value: UInt128 = 0
            withUnsafeBytes(of: address.sin6_addr) { bytes in
                for byte in bytes { value = value << 8 | UInt128(byte) }
            }
            self.init(value: value)
        default:
            return nil
        }
    }

    /// The peer of a connected socket, nil when the kernel cannot say (the socket closed already).
    public static func peer(of fd: Int32) -> IPAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        return result == 0 ? IPAddress(storage) : nil
    }

    /// Parses an address in its usual text forms: dotted IPv4 (`192.0.2.1`, four decimal octets
    /// without leading zeros beyond a lone `0`), IPv6 (`2001:db8::1`, with `::` once and an IPv4
    /// tail allowed, `::ffff:192.0.2.1`). No brackets, zone ids, ports or spaces: nil for anything else.
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        if let v4 = Self.parseIPv4(bytes[...]) {
            self.init(ipv4: v4)
        } else if let v6 = Self.parseIPv6(bytes[...]) {
            self.init(value: v6)
        } else {
            return nil
        }
    }

    static func parseIPv4(_ bytes: ArraySlice<UInt8>) -> UInt32? {
        var value: UInt32 = 0
        var octets = 0
        var index = bytes.startIndex
        while octets < 4 {
            var octet: UInt32 = 0
            var digits = 0
            let start = index
            while index < bytes.endIndex, bytes[index] >= 0x30, bytes[index] <= 0x39, digits < 3 {
                octet = octet * 10 + UInt32(bytes[index] - 0x30)
                digits += 1
                index += 1
            }
            // One to three digits, at most 255, and no leading zero (which some readers take for octal).
            guard digits > 0, octet <= 255, !(digits > 1 && bytes[start] == 0x30) else { return nil }
            value = value << 8 | octet
            octets += 1
            if octets < 4 {
                guard index < bytes.endIndex, bytes[index] == 0x2E else { return nil }
                index += 1
            }
        }
        return index == bytes.endIndex ? value : nil
    }

    static func parseIPv6(_ bytes: ArraySlice<UInt8>) -> UInt128? {
        guard !bytes.isEmpty, bytes.count <= 45 else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawGap = false
        var index = bytes.startIndex
        // A leading "::".
        if bytes.count >= 2, bytes[index] == 0x3A {
            guard bytes[index + 1] == 0x3A else { return nil }
            sawGap = true
            index += 2
            if index == bytes.endIndex { return 0 }
        }
        while index < bytes.endIndex {
            // An IPv4 tail: the last part (no colon left) holds a dot.
            if !bytes[index...].contains(0x3A), bytes[index...].contains(0x2E) {
                guard let v4 = parseIPv4(bytes[index...]) else { return nil }
                let groups = [UInt16(v4 >> 16), UInt16(v4 & 0xFFFF)]
                if sawGap { tail += groups } else { head += groups }
                index = bytes.endIndex
                break
            }
            var group: UInt32 = 0
            var digits = 0
            while index < bytes.endIndex, let digit = Self.hexDigit(bytes[index]) {
                guard digits < 4 else { return nil }
                group = group << 4 | UInt32(digit)
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            if sawGap { tail.append(UInt16(group)) } else { head.append(UInt16(group)) }
            guard index < bytes.endIndex else { break }
            guard bytes[index] == 0x3A else { return nil }
            index += 1
            if index < bytes.endIndex, bytes[index] == 0x3A {
                guard !sawGap else { return nil }
                sawGap = true
                index += 1
                if index == bytes.endIndex { break }
            } else if index == bytes.endIndex {
                return nil  // a trailing single ":"
            }
        }
        let count = head.count + tail.count
        guard sawGap ? count <= 7 : count == 8 else { return nil }
        let groups = head + Array(repeating: 0, count: 8 - count) + tail
        return groups.reduce(UInt128(0)) { $0 << 16 | UInt128($1) }
    }

    static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    public static func < (lhs: IPAddress, rhs: IPAddress) -> Bool { lhs.value < rhs.value }

    /// Dotted IPv4 for an IPv4 (or mapped) address, else IPv6 groups in hexadecimal with the
    /// longest run of zero groups as `::`.
    public var description: String {
        if isIPv4 {
            let v4 = UInt32(truncatingIfNeeded: value)
            return "\(v4 >> 24).\(v4 >> 16 & 0xFF).\(v4 >> 8 & 0xFF).\(v4 & 0xFF)"
        }
        let groups = (0..<8).map { UInt16(truncatingIfNeeded: value >> (112 - 16 * UInt128($0))) }
        var best = (start: -1, length: 0)
        var run = (start: -1, length: 0)
        for (index, group) in groups.enumerated() {
            if group == 0 {
                run = run.start < 0 ? (index, 1) : (run.start, run.length + 1)
                if run.length > best.length { best = run }
            } else {
                run = (-1, 0)
            }
        }
        let hex = groups.map { String($0, radix: 16) }
        guard best.length > 1 else { return hex.joined(separator: ":") }
        let left = hex[..<best.start].joined(separator: ":")
        let right = hex[(best.start + best.length)...].joined(separator: ":")
        return left + "::" + right
    }
}
