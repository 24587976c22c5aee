import Foundation
import Synchronization
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The tracker's transport for plain `http://` endpoints: HTTP/1.1 over one kept-alive TCP
/// connection, with its blocking socket calls on a queue of its own. The tracker uses it on Linux,
/// where swift-corelibs-foundation's `URLSession` spends about a millisecond of CPU on every request
/// (a fifth of what AdTally itself takes to store a batch of 50), which would make the client slower
/// than the server it feeds. It speaks only what the tracker needs: one request at a time, answers
/// framed by `Content-Length`, chunked coding or the end of the connection.
public final class PlainHTTPTransport: EventTransport {
    private let host: String
    private let port: UInt16
    private let pathPrefix: String
    private let timeout: Duration
    private let queue = DispatchQueue(label: "AdTallyClient.PlainHTTPTransport")
    /// The kept-alive connection, -1 when there is none. Only the queue opens and closes it; a
    /// cancellation shuts it down from elsewhere to wake a blocked `poll`.
    private let connection = Mutex<Int32>(-1)

    /// A transport to `baseURL`, which must be `http://host[:port][/prefix]`. Each request must
    /// complete within `timeout`.
    public init(baseURL: URL, timeout: Duration = .seconds(30)) throws(TrackerError) {
        guard baseURL.scheme?.lowercased() == "http", let host = baseURL.host, !host.isEmpty else {
            throw .invalidConfiguration("PlainHTTPTransport needs an http:// URL with a host, not \(baseURL)")
        }
        let port = baseURL.port ?? 80
        guard (1...65535).contains(port) else { throw .invalidConfiguration("port \(port) out of range") }
        self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        self.port = UInt16(port)
        var prefix = baseURL.path
        while prefix.hasSuffix("/") { prefix.removeLast() }
        pathPrefix = prefix
        self.timeout = timeout
    }

    deinit {
        let fd = connection.withLock { $0 }
        if fd >= 0 { close(fd) }
    }

    /// Sends the request on the kept-alive connection (opening one when needed). A request that
    /// meets a connection the server closed while idle is sent once more on a fresh one: nothing of
    /// it was read, and the tracker's requests are idempotent anyway.
    public func send(_ request: TransportRequest) async -> TransportResult {
        let cancelled = CancellationFlag()
        return await withTaskCancellationHandler {
            // On the tracker's sender thread the blocking calls are made right there; elsewhere they
            // go to the transport's own queue, so that no shared thread ever blocks.
            if SenderThread.isCurrent { return queue.sync { exchange(request, cancelled: cancelled) } }
            return await withCheckedContinuation { (continuation: CheckedContinuation<TransportResult, Never>) in
                queue.async {
                    continuation.resume(returning: self.exchange(request, cancelled: cancelled))
                }
            }
        } onCancel: {
            cancelled.set()
            connection.withLock { fd in if fd >= 0 { _ = shutdown(fd, Int32(SHUT_RDWR)) } }
        }
    }

    private struct Failure: Error {
        let description: String
        /// The connection ended before any byte of an answer.
        var beforeAnswer = false
    }

    private func exchange(_ request: TransportRequest, cancelled: CancellationFlag) -> TransportResult {
        let deadline = ContinuousClock.now + timeout
        let bytes = encode(request)
        for attempt in 0..<2 {
            if cancelled.isSet { return .failure("cancelled") }
            var fd = connection.withLock { $0 }
            let reused = fd >= 0
            if !reused {
                do {
                    fd = try connect(deadline: deadline, cancelled: cancelled)
                } catch {
                    return .failure(error.description)
                }
                connection.withLock { $0 = fd }
            }
            do {
                try write(bytes, to: fd, deadline: deadline, cancelled: cancelled)
                let (response, keepAlive) = try readResponse(fd, method: request.method, deadline: deadline,
                                                             cancelled: cancelled)
                if !keepAlive { dropConnection() }
                return .response(response)
            } catch {
                dropConnection()
                if error.beforeAnswer, reused, attempt == 0 { continue }
                return .failure(error.description)
            }
        }
        return .failure("connection closed before an answer")
    }

    private func dropConnection() {
        let fd = connection.withLock { fd -> Int32 in
            defer { fd = -1 }
            return fd
        }
        if fd >= 0 { close(fd) }
    }

    private func encode(_ request: TransportRequest) -> [UInt8] {
        let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var head = "\(request.method) \(pathPrefix)\(request.path) HTTP/1.1\r\nHost: \(hostHeader)\r\n"
        head += "User-Agent: AdTallyClient\r\nAccept: application/json\r\n"
        if let body = request.body {
            head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if let body = request.body { bytes.append(contentsOf: body) }
        return bytes
    }

    // MARK: Sockets

    private func remainingMilliseconds(_ deadline: ContinuousClock.Instant) -> Int32 {
        let left = deadline - ContinuousClock.now
        guard left > .zero else { return 0 }
        let millis = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
        return Int32(min(max(millis, 1), 100)) // wake at least every 100 ms to see a cancellation
    }

    /// Waits until `fd` is ready for `events`; throws at the deadline or on cancellation.
    private func waitUntilReady(_ fd: Int32, _ events: Int16, deadline: ContinuousClock.Instant,
                       cancelled: CancellationFlag) throws(Failure) {
        while true {
            if cancelled.isSet { throw Failure(description: "cancelled") }
            let wait = remainingMilliseconds(deadline)
            if wait == 0 { throw Failure(description: "timed out") }
            var poller = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&poller, 1, wait)
            if ready > 0 { return }
            if ready < 0, errno != EINTR { throw Failure(description: "poll: errno \(errno)") }
        }
    }

    /// One address `getaddrinfo` gave, copied out of its list.
    private struct Address: Sendable {
        let family: Int32
        let type: Int32
        let proto: Int32
        let sockaddr: [UInt8]
    }

    /// A lookup on another thread: the result, and a semaphore signalled once it is there.
    private final class Lookup: Sendable {
        let result = Mutex<Result<[Address], Failure>?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    /// Resolves the host on a global queue and waits for it here, looking at the deadline and the
    /// cancellation every 100 ms: `getaddrinfo` itself cannot be interrupted, and a resolver that
    /// never answers must not hold a cancelled request (or a tracker's shutdown). An abandoned
    /// lookup finishes in the background and frees what it got.
    private func resolve(deadline: ContinuousClock.Instant, cancelled: CancellationFlag) throws(Failure) -> [Address] {
        let lookup = Lookup()
        let (host, port) = (self.host, self.port)
        DispatchQueue.global().async {
            let result = Self.lookUp(host, port)
            lookup.result.withLock { $0 = result }
            lookup.done.signal()
        }
        while true {
            if cancelled.isSet { throw Failure(description: "cancelled") }
            let wait = remainingMilliseconds(deadline)
            if wait == 0 { throw Failure(description: "cannot resolve \(host): timed out") }
            if lookup.done.wait(timeout: .now() + .milliseconds(Int(wait))) == .success { break }
        }
        // Signalled after the result was stored: the fallback cannot be reached.
        return try (lookup.result.withLock { $0 } ?? .failure(Failure(description: "cannot resolve \(host)"))).get()
    }

    private static func lookUp(_ host: String, _ port: UInt16) -> Result<[Address], Failure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
        #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failure(Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
        }
        defer { freeaddrinfo(first) }
        var addresses: [Address] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next {
            next = info.pointee.ai_next
            guard let address = info.pointee.ai_addr else { continue }
            let bytes = UnsafeRawBufferPointer(start: address, count: Int(info.pointee.ai_addrlen))
            addresses.append(Address(family: info.pointee.ai_family, type: info.pointee.ai_socktype,
                                     proto: info.pointee.ai_protocol, sockaddr: Array(bytes)))
        }
        return .success(addresses)
    }

    /// Connects to the first address that answers; a cancellation ends the lookup or the wait for
    /// the handshake within 100 ms (a server that drops the SYN would otherwise hold it until the
    /// deadline).
    private func connect(deadline: ContinuousClock.Instant, cancelled: CancellationFlag) throws(Failure) -> Int32 {
        var lastError = "no address for \(host)"
        for address in try resolve(deadline: deadline, cancelled: cancelled) {
            let fd = socket(address.family, address.type, address.proto)
            guard fd >= 0 else { lastError = "socket: errno \(errno)"; continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            #if canImport(Darwin)
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            let result = address.sockaddr.withUnsafeBytes { bytes -> Int32 in
                guard let base = bytes.baseAddress else { return -1 }
                return posixConnect(fd, UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: sockaddr.self)),
                                    socklen_t(bytes.count))
            }
            if result == 0 { return fd }
            if errno == EINPROGRESS {
                do {
                    try waitUntilReady(fd, Int16(POLLOUT), deadline: deadline, cancelled: cancelled)
                    var code: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length)
                    if code == 0 { return fd }
                    lastError = "connect to \(host):\(port): \(String(cString: strerror(code)))"
                } catch {
                    close(fd)
                    if cancelled.isSet { throw error }
                    lastError = "connect to \(host):\(port): \(error.description)"
                    continue
                }
            } else {
                lastError = "connect to \(host):\(port): \(String(cString: strerror(errno)))"
            }
            close(fd)
        }
        throw Failure(description: lastError)
    }

    private func write(_ bytes: [UInt8], to fd: Int32, deadline: ContinuousClock.Instant,
                       cancelled: CancellationFlag) throws(Failure) {
        var sent = 0
        while sent < bytes.count {
            #if canImport(Darwin)
            let flags: Int32 = 0
            #else
            let flags = Int32(MSG_NOSIGNAL)
            #endif
            let count = bytes[sent...].withUnsafeBytes { posixSend(fd, $0.baseAddress, $0.count, flags) }
            if count > 0 { sent += count; continue }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                try waitUntilReady(fd, Int16(POLLOUT), deadline: deadline, cancelled: cancelled)
                continue
            }
            throw Failure(description: "send: \(String(cString: strerror(errno)))", beforeAnswer: true)
        }
    }

    /// Reads one final answer (skipping interim `1xx` ones); the flag says whether the connection
    /// may carry the next request.
    private func readResponse(_ fd: Int32, method: String, deadline: ContinuousClock.Instant,
                              cancelled: CancellationFlag) throws(Failure) -> (TransportResponse, Bool) {
        var reader = SocketReader(fd: fd)
        while true {
            let head = try reader.head { () throws(Failure) in
                try waitUntilReady(fd, Int16(POLLIN), deadline: deadline, cancelled: cancelled)
            }
            guard let parsed = ResponseHead(head) else { throw Failure(description: "malformed answer head") }
            if parsed.status < 200 { continue }
            let wait = { () throws(Failure) in try self.waitUntilReady(fd, Int16(POLLIN), deadline: deadline, cancelled: cancelled) }
            let body: [UInt8]
            var keepAlive = parsed.keepAlive
            if method == "HEAD" || parsed.status == 204 || parsed.status == 304 {
                body = []
            } else if parsed.chunked {
                body = try reader.chunkedBody(wait: wait)
            } else if let length = parsed.contentLength {
                body = try reader.bytes(length, wait: wait)
            } else {
                body = try reader.untilEnd(wait: wait)
                keepAlive = false
            }
            let response = TransportResponse(status: parsed.status, headers: parsed.headers, body: Data(body))
            return (response, keepAlive)
        }
    }

    /// The parts of an answer's head the transport needs.
    private struct ResponseHead {
        let status: Int
        let headers: [String: String]
        let contentLength: Int?
        let chunked: Bool
        let keepAlive: Bool

        init?(_ bytes: [UInt8]) {
            // Byte by byte: an answer's head is parsed on the sender's path, between two requests.
            var lines: [ArraySlice<UInt8>] = []
            var start = 0
            for index in bytes.indices where bytes[index] == 10 {
                let end = index > start && bytes[index - 1] == 13 ? index - 1 : index
                lines.append(bytes[start..<end])
                start = index + 1
            }
            lines.append(bytes[start...])
            let statusLine = lines[0]
            guard statusLine.count >= 12, statusLine.starts(with: "HTTP/1.".utf8),
                  statusLine[statusLine.startIndex + 8] == 0x20 else { return nil }
            var status = 0
            for byte in statusLine[(statusLine.startIndex + 9)..<(statusLine.startIndex + 12)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                status = status * 10 + Int(byte - 0x30)
            }
            guard status >= 100 else { return nil }
            var headers: [String: String] = [:]
            for line in lines.dropFirst() where !line.isEmpty {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return nil }
                let name = String(decoding: line[..<colon].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
                var value = line[(colon + 1)...]
                while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
                while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
                let text = String(decoding: value, as: UTF8.self)
                headers[name] = headers[name].map { earlier in "\(earlier), \(text)" } ?? text
            }
            let connection = headers["connection"]?.lowercased() ?? ""
            self.status = status
            self.headers = headers
            chunked = headers["transfer-encoding"]?.lowercased().contains("chunked") ?? false
            if let text = headers["content-length"] {
                guard let length = Int(text), length >= 0, length <= 64 << 20 else { return nil }
                contentLength = length
            } else {
                contentLength = nil
            }
            let http11 = statusLine[statusLine.startIndex + 7] == UInt8(ascii: "1")
            keepAlive = http11 ? !connection.contains("close") : connection.contains("keep-alive")
        }
    }

    /// Buffered reads from a non-blocking socket; `wait` blocks until more may be read.
    private struct SocketReader {
        let fd: Int32
        var buffer: [UInt8] = []
        var received = 0

        init(fd: Int32) { self.fd = fd }

        /// Reads more into the buffer; false at the end of the connection.
        mutating func fill(wait: () throws(Failure) -> Void) throws(Failure) -> Bool {
            var chunk = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    buffer.append(contentsOf: chunk[0..<count])
                    received += count
                    return true
                }
                if count == 0 { return false }
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { try wait(); continue }
                throw Failure(description: "recv: \(String(cString: strerror(errno)))", beforeAnswer: received == 0)
            }
        }

        mutating func head(wait: () throws(Failure) -> Void) throws(Failure) -> [UInt8] {
            while true {
                if let end = Self.headEnd(buffer) {
                    let head = Array(buffer[..<end])
                    buffer.removeFirst(end + 4)
                    return head
                }
                guard buffer.count <= 64 * 1024 else { throw Failure(description: "answer head too large") }
                guard try fill(wait: wait) else {
                    throw Failure(description: "connection closed before an answer", beforeAnswer: received == 0)
                }
            }
        }

        mutating func bytes(_ count: Int, wait: () throws(Failure) -> Void) throws(Failure) -> [UInt8] {
            while buffer.count < count {
                guard try fill(wait: wait) else { throw Failure(description: "connection closed mid-answer") }
            }
            let body = Array(buffer[..<count])
            buffer.removeFirst(count)
            return body
        }

        mutating func untilEnd(wait: () throws(Failure) -> Void) throws(Failure) -> [UInt8] {
            while try fill(wait: wait) {
                guard buffer.count <= 64 << 20 else { throw Failure(description: "answer too large") }
            }
            defer { buffer.removeAll() }
            return buffer
        }

        mutating func line(wait: () throws(Failure) -> Void) throws(Failure) -> String {
            while true {
                if let end = Self.crlf(buffer) {
                    let line = String(decoding: buffer[..<end], as: UTF8.self)
                    buffer.removeFirst(end + 2)
                    return line
                }
                guard buffer.count <= 16 * 1024 else { throw Failure(description: "chunk line too long") }
                guard try fill(wait: wait) else { throw Failure(description: "connection closed mid-answer") }
            }
        }

        mutating func chunkedBody(wait: () throws(Failure) -> Void) throws(Failure) -> [UInt8] {
            var body: [UInt8] = []
            while true {
                let sizeText = try line(wait: wait).split(separator: ";").first.map(String.init) ?? ""
                guard let size = Int(sizeText.trimmingWhitespace, radix: 16), size >= 0, size <= 64 << 20 else {
                    throw Failure(description: "bad chunk size")
                }
                if size == 0 {
                    while try !line(wait: wait).isEmpty {} // trailers
                    return body
                }
                body += try bytes(size, wait: wait)
                guard try line(wait: wait).isEmpty else { throw Failure(description: "bad chunk end") }
                guard body.count <= 64 << 20 else { throw Failure(description: "answer too large") }
            }
        }

        static func headEnd(_ bytes: [UInt8]) -> Int? {
            guard bytes.count >= 4 else { return nil }
            for index in 0...(bytes.count - 4)
            where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
                return index
            }
            return nil
        }

        static func crlf(_ bytes: [UInt8]) -> Int? {
            guard bytes.count >= 2 else { return nil }
            for index in 0...(bytes.count - 2) where bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            return nil
        }
    }
}

/// Set once, from a cancellation handler, and read by the queue's blocking loops.
final class CancellationFlag: Sendable {
    private let value = Atomic<Bool>(false)

    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

// `connect(2)` and `send(2)`, which the transport's own `connect` and `send` methods shadow.
#if canImport(Darwin)
private func posixConnect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>!, _ length: socklen_t) -> Int32 {
    Darwin.connect(fd, address, length)
}
private func posixSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    Darwin.send(fd, bytes, count, flags)
}
#elseif canImport(Glibc)
private func posixConnect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>!, _ length: socklen_t) -> Int32 {
    Glibc.connect(fd, address, length)
}
private func posixSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    Glibc.send(fd, bytes, count, flags)
}
#else
private func posixConnect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>!, _ length: socklen_t) -> Int32 {
    Musl.connect(fd, address, length)
}
private func posixSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    Musl.send(fd, bytes, count, flags)
}
#endif
