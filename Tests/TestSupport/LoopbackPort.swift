import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1 chosen by the kernel, for tests that start servers of their own.
public enum LoopbackPort {
    /// A socket bound to a fresh port (and listening when `listening`), which the caller closes:
    /// while it is open, nobody else can bind that port.
    public static func bind(listening: Bool) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestDatabaseError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard Glibc.bind(fd, pointer, length) == 0, !listening || listen(fd, 1) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw TestDatabaseError("no free loopback port: errno \(code)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A port nobody listens on now (bound, read and released).
    public static func free() throws -> Int {
        let bound = try bind(listening: false)
        close(bound.fd)
        return bound.port
    }
}
