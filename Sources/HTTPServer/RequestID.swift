import Synchronization

/// Request ids: the client's `X-Request-Id` when it is 1 to 128 visible ASCII characters (so it can
/// be logged and echoed safely), otherwise 32 lowercase hex digits: a random per-process prefix (16
/// digits, drawn once) and a per-process counter (16 digits). Unique within a process and, by the
/// random prefix, across processes; cheap, since `generate` runs for almost every request (one
/// atomic increment and one small string, no `getrandom(2)` call).
enum RequestID {
    static func take(from value: String?) -> String {
        if let value, (1...128).contains(value.utf8.count), value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            return value
        }
        return generate()
    }

    private static let prefix: UInt64 = {
        var g = SystemRandomNumberGenerator()
        return g.next()
    }()

    private static let counter = Atomic<UInt64>(0)

    static func generate() -> String {
        let high = prefix
        // Starts from a random-prefixed value; wrapping after 2^64 ids is harmless.
        let low = counter.wrappingAdd(1, ordering: .relaxed).newValue
        return String(unsafeUninitializedCapacity: 32) { out in
            let digits: StaticString = "0123456789abcdef"
            digits.withUTF8Buffer { hex in
                for i in 0..<16 {
                    out[i] = hex[Int((high >> UInt64(60 - 4 * i)) & 0xF)]
                    out[16 + i] = hex[Int((low >> UInt64(60 - 4 * i)) & 0xF)]
                }
            }
            return 32
        }
    }
}
