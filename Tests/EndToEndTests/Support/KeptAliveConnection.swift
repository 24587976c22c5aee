import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One kept-alive connection to the server under test, from a loopback address of the test's
/// choosing (Linux routes all of 127.0.0.0/8 to the loopback device, so `127.0.0.2` is a client of
/// its own for the limits per client). Requests are sent one at a time; every read has a timeout.
final class KeptAliveConnection {
    let fd: Int32
    private var buffer = Data()

    init(port: Int, from source: String = "127.0.0.1", timeout: Int = 15) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTPClientError(description: "socket: errno \(errno)") }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let connected = bound == 0 ? withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } : -1
        guard connected == 0 else {
            let code = errno
            close(fd)
            throw HTTPClientError(description: "connect from \(source) to port \(port): errno \(code)")
        }
    }

    deinit { close(fd) }

    /// Sends the request and reads its response (by `Content-Length`).
    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: Data? = nil) throws -> HTTPResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        var outgoing = Data(head.utf8)
        if let body { outgoing.append(body) }
        try send(outgoing)
        return try readResponse()
    }

    func send(_ data: Data) throws {
        var sent = 0
        while sent < data.count {
            let count = data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, data.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw HTTPClientError(description: "send: errno \(errno)") }
            sent += count
        }
    }

    /// Reads one response; throws on a timeout or when the connection ends first.
    func readResponse() throws -> HTTPResponse {
        let separator = Data("\r\n\r\n".utf8)
        while buffer.range(of: separator) == nil { try fill() }
        let end = buffer.range(of: separator)!.upperBound
        let length = Self.contentLength(buffer[buffer.startIndex..<end])
        while buffer.count - (end - buffer.startIndex) < length { try fill() }
        let whole = buffer.prefix(end - buffer.startIndex + length)
        buffer = Data(buffer.dropFirst(whole.count))
        return try HTTPClient.parse(Data(whole))
    }

    /// Whether the server closed the connection (end of file or a reset) within the read timeout.
    func isClosedByServer() -> Bool {
        var byte = [UInt8](repeating: 0, count: 1)
        let count = byte.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 1, 0) }
        return count == 0 || (count < 0 && errno == ECONNRESET)
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer.append(contentsOf: chunk[0..<count])
            return
        }
        if count < 0 && errno == EINTR { return }
        throw HTTPClientError(description: count == 0 ? "the server closed the connection" : "recv: errno \(errno)")
    }
}

extension KeptAliveConnection {
    /// The `Content-Length` of a response head, 0 without one.
    static func contentLength(_ head: Data) -> Int {
        for line in String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                return Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        return 0
    }
}
