import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Random bytes for event ids, taken from the system 4 KiB at a time: on Linux every
/// `SystemRandomNumberGenerator` draw is a `getrandom` system call of about 2 µs, and an id needs
/// two, which was most of what a call to `impression` cost. The bytes are the system's own
/// (`arc4random_buf`, or `/dev/urandom`, which never blocks once the system has booted).
final class RandomPool: Sendable {
    static let shared = RandomPool()

    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: 4096)
        var next = 4096
    }

    private let pool = Lock(Pool())

    /// A version 4 UUID.
    func uuid() -> UUID {
        pool.withLock { pool in
            if pool.next + 16 > pool.bytes.count {
                Self.fill(&pool.bytes)
                pool.next = 0
            }
            let b = pool.bytes
            let i = pool.next
            pool.next += 16
            return UUID(uuid: (b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6] & 0x0F | 0x40, b[i + 7],
                               b[i + 8] & 0x3F | 0x80, b[i + 9], b[i + 10], b[i + 11], b[i + 12], b[i + 13], b[i + 14], b[i + 15]))
        }
    }

    private static func fill(_ bytes: inout [UInt8]) {
        #if canImport(Darwin)
        bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress, $0.count) }
        #else
        if urandom >= 0 {
            var filled = 0
            while filled < bytes.count {
                let count = bytes[filled...].withUnsafeMutableBytes { read(urandom, $0.baseAddress, $0.count) }
                if count > 0 { filled += count } else if count < 0, errno == EINTR { continue } else { break }
            }
            if filled == bytes.count { return }
        }
        var generator = SystemRandomNumberGenerator()
        for index in bytes.indices { bytes[index] = generator.next() }
        #endif
    }

    #if !canImport(Darwin)
    private static let urandom: Int32 = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
    #endif
}
