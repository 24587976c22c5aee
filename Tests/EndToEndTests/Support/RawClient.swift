import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a raw exchange produced: the parsed response (nil when none came back) and whether the server
/// closed the connection after it.
struct RawExchange {
    let response: HTTPResponse?
    /// The server closed its side (end of file or reset) within the wait after the response.
    let closed: Bool
    /// Everything received, for failure messages.
    let raw: Data
    /// Why no response could be parsed, if so.
    let problem: String?
}

/// Writes exact bytes to the server (ones `URLSession` or `HTTPClient` would refuse to produce: NUL,
/// bare LF, bad versions, conflicting framing) on a fresh connection and reads one response.
///
/// Sending stops as soon as the server has answered (it may refuse a 10 MB body from its
/// `Content-Length` alone, and reading before our write fails keeps its answer from being lost to a
/// reset). Every step is bounded by `timeout`.
enum RawClient {
    static func exchange(port: Int, _ bytes: [UInt8], timeout: TimeInterval = 15,
                         waitForClose: TimeInterval = 3) throws -> RawExchange {
        let fd = try Loopback.connect(port: port)
        defer { close(fd) }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)

        let deadline = Date() + timeout
        var sent = 0
        var incoming = Data()
        var closed = false
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)

        /// Reads what is there; false once the peer closed or reset.
        func readAvailable() -> Bool {
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 { incoming.append(contentsOf: buffer[0..<count]); continue }
                if count == 0 { return false }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return true }
                return false
            }
        }
        func remainingMillis(_ until: Date) -> Int32 {
            Int32(max(0, min(1000, until.timeIntervalSinceNow * 1000)))
        }

        // Write until everything is sent or the server starts answering.
        while sent < bytes.count, incoming.isEmpty, !closed, Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN | POLLOUT), revents: 0)
            let ready = poll(&poller, 1, remainingMillis(deadline))
            if ready < 0 { if errno == EINTR { continue }; break }
            if ready == 0 { continue }
            if poller.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                if !readAvailable() { closed = true }
                continue
            }
            if poller.revents & Int16(POLLOUT) != 0 {
                let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, min(bytes.count - sent, 64 * 1024), Int32(MSG_NOSIGNAL)) }
                if count > 0 { sent += count; continue }
                if count < 0, errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                break // the server stopped reading; what it said is read below
            }
        }

        // Read until one whole response is in (then, optionally, until close).
        var response: HTTPResponse?
        var problem: String?
        var closeDeadline: Date?
        while Date() < (closeDeadline ?? deadline) {
            if response == nil, let parsed = completeResponse(incoming) {
                response = parsed
                if closed || waitForClose <= 0 { break }
                closeDeadline = Date() + waitForClose
            }
            if closed { break }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, remainingMillis(closeDeadline ?? deadline))
            if ready < 0 { if errno == EINTR { continue }; break }
            if ready == 0 { continue }
            if !readAvailable() { closed = true }
        }
        if response == nil {
            do { response = try HTTPClient.parse(incoming) } catch { problem = "\(error)" }
        }
        return RawExchange(response: response, closed: closed, raw: incoming, problem: problem)
    }

    /// The first final response in `data` once its head and its `Content-Length` body are complete;
    /// interim `1xx` responses before it are skipped.
    static func completeResponse(_ data: Data) -> HTTPResponse? {
        var rest = data[...]
        while true {
            guard let end = rest.range(of: Data("\r\n\r\n".utf8)) else { return nil }
            let head = String(decoding: rest[rest.startIndex..<end.lowerBound], as: UTF8.self).lowercased()
            if head.hasPrefix("http/1.1 1") || head.hasPrefix("http/1.0 1") {
                rest = rest[end.upperBound...]
                continue
            }
            var length = 0
            for line in head.components(separatedBy: "\r\n") where line.hasPrefix("content-length:") {
                length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
            }
            guard rest.count - (end.upperBound - rest.startIndex) >= length else { return nil }
            return try? HTTPClient.parse(Data(rest))
        }
    }
}
