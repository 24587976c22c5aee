/// The 64-bit FNV-1a hash: a small, dependency-free digest, of the dashboard's files for their
/// `ETag`s. Not cryptographic.
public struct FNV1a64: Sendable {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    public static let prime: UInt64 = 0x0000_0100_0000_01B3

    public private(set) var value: UInt64 = offsetBasis

    public init() {}

    public mutating func update<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        for byte in bytes {
            value ^= UInt64(byte)
            value = value &* FNV1a64.prime
        }
    }

    /// The hash of `bytes` in one call.
    public static func hash<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt64 {
        var hasher = FNV1a64()
        hasher.update(bytes)
        return hasher.value
    }
}
