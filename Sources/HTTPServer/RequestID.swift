/// Request ids: the client's `X-Request-Id` when it is 1 to 128 visible ASCII characters (so it can
/// be logged and echoed safely), otherwise 32 random hex digits.
enum RequestID {
    static func take(from value: String?) -> String {
        if let value, (1...128).contains(value.utf8.count), value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
            return value
        }
        return generate()
    }

    static func generate() -> String {
        var g = SystemRandomNumberGenerator()
        let a = String(g.next() as UInt64, radix: 16), b = String(g.next() as UInt64, radix: 16)
        return String(repeating: "0", count: 16 - a.count) + a + String(repeating: "0", count: 16 - b.count) + b
    }
}
