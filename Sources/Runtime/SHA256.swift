/// SHA-256 (FIPS 180-4), for the digests the server keeps instead of secrets (an advertiser key is
/// stored as its digest) and for HMAC-SHA-256 (`HMACSHA256`). No toolchain module on Linux offers
/// it; this one is checked against the standard's test vectors (`SHA256Tests`).
public struct SHA256: Sendable {
    /// The digest's length in bytes.
    public static let byteCount = 32
    /// The block's length in bytes.
    static let blockSize = 64

    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19)
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0

    public init() {
        buffer.reserveCapacity(Self.blockSize)
    }

    /// A digest: 32 bytes, kept as four words so that it is a cheap dictionary key.
    public struct Digest: Sendable, Hashable {
        let w0, w1, w2, w3: UInt64

        /// The digest of 32 `bytes` (as the database keeps it); nil for another length.
        public init?(bytes: some Collection<UInt8>) {
            guard bytes.count == SHA256.byteCount else { return nil }
            var words: [UInt64] = [0, 0, 0, 0]
            for (index, byte) in bytes.enumerated() { words[index / 8] = words[index / 8] << 8 | UInt64(byte) }
            (w0, w1, w2, w3) = (words[0], words[1], words[2], words[3])
        }

        /// The digest written in hexadecimal (64 digits, either case); nil for anything else.
        public init?(hex: String) {
            let utf8 = Array(hex.utf8)
            guard utf8.count == 2 * SHA256.byteCount else { return nil }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(SHA256.byteCount)
            for index in stride(from: 0, to: utf8.count, by: 2) {
                guard let high = Self.nibble(utf8[index]), let low = Self.nibble(utf8[index + 1]) else { return nil }
                bytes.append(high << 4 | low)
            }
            self.init(bytes: bytes)
        }

        private static func nibble(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }

        init(state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)) {
            w0 = UInt64(state.0) << 32 | UInt64(state.1)
            w1 = UInt64(state.2) << 32 | UInt64(state.3)
            w2 = UInt64(state.4) << 32 | UInt64(state.5)
            w3 = UInt64(state.6) << 32 | UInt64(state.7)
        }

        /// The 32 bytes, most significant first.
        public var bytes: [UInt8] {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(SHA256.byteCount)
            for word in [w0, w1, w2, w3] {
                for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
            }
            return bytes
        }

        /// The bytes in lower-case hexadecimal.
        public var hex: String {
            let digits: [UInt8] = Array("0123456789abcdef".utf8)
            var text: [UInt8] = []
            text.reserveCapacity(2 * SHA256.byteCount)
            for byte in bytes {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0x0F)])
            }
            return String(decoding: text, as: UTF8.self)
        }
    }

    /// The digest of `bytes`.
    public static func hash(_ bytes: some Sequence<UInt8>) -> Digest {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// Adds `bytes` to the message.
    public mutating func update(_ bytes: some Sequence<UInt8>) {
        for byte in bytes {
            buffer.append(byte)
            length &+= 1
            if buffer.count == Self.blockSize {
                compress(buffer)
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    /// The digest of the message so far (the hasher is then spent).
    public mutating func finalize() -> Digest {
        let bits = length &* 8
        buffer.append(0x80)
        if buffer.count > Self.blockSize - 8 {
            while buffer.count < Self.blockSize { buffer.append(0) }
            compress(buffer)
            buffer.removeAll(keepingCapacity: true)
        }
        while buffer.count < Self.blockSize - 8 { buffer.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { buffer.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        compress(buffer)
        buffer.removeAll()
        return Digest(state: state)
    }

    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    private mutating func compress(_ block: [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            compress(block, schedule: w)
        }
    }

    private mutating func compress(_ block: [UInt8], schedule w: UnsafeMutableBufferPointer<UInt32>) {
        for t in 0..<16 {
            w[t] = UInt32(block[4 * t]) << 24 | UInt32(block[4 * t + 1]) << 16 | UInt32(block[4 * t + 2]) << 8 | UInt32(block[4 * t + 3])
        }
        for t in 16..<64 {
            let s0 = w[t - 15].rotatedRight(7) ^ w[t - 15].rotatedRight(18) ^ (w[t - 15] >> 3)
            let s1 = w[t - 2].rotatedRight(17) ^ w[t - 2].rotatedRight(19) ^ (w[t - 2] >> 10)
            w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = state
        for t in 0..<64 {
            let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
            let choice = (e & f) ^ (~e & g)
            let temp1 = h &+ s1 &+ choice &+ Self.k[t] &+ w[t]
            let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
            let majority = (a & b) ^ (a & c) ^ (b & c)
            let temp2 = s0 &+ majority
            h = g
            g = f
            f = e
            e = d &+ temp1
            d = c
            c = b
            b = a
            a = temp1 &+ temp2
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h)
    }
}

/// HMAC-SHA-256 (RFC 2104) with one key for many messages: the key's inner and outer pads are
/// hashed once, so that each message costs two compressions beyond its own blocks.
public struct HMACSHA256: Sendable {
    private let inner: SHA256
    private let outer: SHA256

    public init(key: [UInt8]) {
        var block = key.count > SHA256.blockSize ? SHA256.hash(key).bytes : key
        block += [UInt8](repeating: 0, count: SHA256.blockSize - block.count)
        var inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        var outer = SHA256()
        outer.update(block.map { $0 ^ 0x5c })
        self.inner = inner
        self.outer = outer
    }

    /// The authentication code of `message`.
    public func code(_ message: some Sequence<UInt8>) -> SHA256.Digest {
        var inner = self.inner
        inner.update(message)
        var outer = self.outer
        outer.update(inner.finalize().bytes)
        return outer.finalize()
    }
}

extension UInt32 {
    fileprivate func rotatedRight(_ count: UInt32) -> UInt32 {
        (self >> count) | (self << (32 - count))
    }
}
