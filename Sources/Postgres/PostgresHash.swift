/// PostgreSQL's hash of a `text` value (`hashtext`), computed here: the hash Citus places a row of
/// a table distributed by a `text` column with (`worker_hash`), so that a client can tell which
/// shard holds a key without asking. It is Bob Jenkins' lookup3 hash as PostgreSQL's `hash_bytes`
/// uses it, over the value's bytes in the database's encoding (UTF-8 here), on a little-endian
/// machine. Valid for deterministic collations (the default); `PostgresHashTests` checks it
/// against the server's `hashtext` for thousands of values.
public enum PostgresHash {
    /// `hashtext(value)`, as the server computes it for `value`'s UTF-8 bytes.
    public static func text(_ value: String) -> Int32 {
        var value = value
        return value.withUTF8 { Int32(bitPattern: bytes($0)) }
    }

    /// `hash_bytes` over `key`: 32 bits.
    public static func bytes(_ key: UnsafeBufferPointer<UInt8>) -> UInt32 {
        let length = key.count
        // The seed PostgreSQL starts all three state words from: the golden ratio, the length and
        // an arbitrary constant.
        let start = 0x9e37_79b9 &+ UInt32(truncatingIfNeeded: length) &+ 3_923_095
        var a = start, b = start, c = start
        var offset = 0
        // Whole 12-byte blocks, as three little-endian words each.
        while length - offset >= 12 {
            a &+= word(key, offset)
            b &+= word(key, offset + 4)
            c &+= word(key, offset + 8)
            mix(&a, &b, &c)
            offset += 12
        }
        // The last 0 to 11 bytes: into a, then b, then c from its second byte (its lowest byte is
        // left for the length, as in PostgreSQL's variant of lookup3), each word little-endian.
        let rest = length - offset
        for index in 0..<rest {
            let byte = UInt32(key[offset + index])
            switch index {
            case 0..<4: a &+= byte << (8 * UInt32(index))
            case 4..<8: b &+= byte << (8 * UInt32(index - 4))
            default: c &+= byte << (8 * UInt32(index - 7))
            }
        }
        finalMix(&a, &b, &c)
        return c
    }

    private static func word(_ key: UnsafeBufferPointer<UInt8>, _ offset: Int) -> UInt32 {
        UInt32(key[offset]) | UInt32(key[offset + 1]) << 8 | UInt32(key[offset + 2]) << 16 | UInt32(key[offset + 3]) << 24
    }

    @inline(__always) private static func rotate(_ x: UInt32, _ k: UInt32) -> UInt32 {
        (x << k) | (x >> (32 - k))
    }

    /// lookup3's `mix`: folds one block into the state.
    @inline(__always) private static func mix(_ a: inout UInt32, _ b: inout UInt32, _ c: inout UInt32) {
        a &-= c; a ^= rotate(c, 4); c &+= b
        b &-= a; b ^= rotate(a, 6); a &+= c
        c &-= b; c ^= rotate(b, 8); b &+= a
        a &-= c; a ^= rotate(c, 16); c &+= b
        b &-= a; b ^= rotate(a, 19); a &+= c
        c &-= b; c ^= rotate(b, 4); b &+= a
    }

    /// lookup3's `final`: mixes the state so every input bit affects every bit of `c`.
    @inline(__always) private static func finalMix(_ a: inout UInt32, _ b: inout UInt32, _ c: inout UInt32) {
        c ^= b; c &-= rotate(b, 14)
        a ^= c; a &-= rotate(c, 11)
        b ^= a; b &-= rotate(a, 25)
        c ^= b; c &-= rotate(b, 16)
        a ^= c; a &-= rotate(c, 4)
        b ^= a; b &-= rotate(a, 14)
        c ^= b; c &-= rotate(b, 24)
    }
}
