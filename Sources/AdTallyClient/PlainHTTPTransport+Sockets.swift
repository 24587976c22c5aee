import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension PlainHTTPTransport {
    // MARK: Sockets

    func remainingMilliseconds(_ deadline: ContinuousClock.Instant) -> Int32 {
        let left = deadline - ContinuousClock.now
        guard left > .zero else { return 0 }
        let millis = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
        return Int32(min(max(millis, 1), 100)) // wake at least every 100 ms to see a cancellation
    }

    /// Waits until `fd` is ready for `events`; throws at the deadline or on cancellation.
    func waitUntilReady(_ fd: Int32, _ events: Int16, deadline: ContinuousClock.Instant,
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
    struct Address: Sendable {
        let family: Int32
        let type: Int32
        let proto: Int32
        let sockaddr: [UInt8]
    }

    /// A lookup on another thread: the result, and a semaphore signalled once it is there.
    private final class Lookup: Sendable {
        let result = Lock<Result<[Address], Failure>?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    /// Resolves the host on a global queue and waits for it here, looking at the deadline and the
    /// cancellation every 100 ms: `getaddrinfo` itself cannot be interrupted, and a resolver that
    /// never answers must not hold a cancelled request (or a tracker's shutdown). An abandoned
    /// lookup finishes in the background and frees what it got.
    func resolve(deadline: ContinuousClock.Instant, cancelled: CancellationFlag) throws(Failure) -> [Address] {
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

    static func lookUp(_ host: String, _ port: UInt16) -> Result<[Address], Failure> {
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
    func connect(deadline: ContinuousClock.Instant, cancelled: CancellationFlag) throws(Failure) -> Int32 {
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

    func write(_ bytes: [UInt8], to fd: Int32, deadline: ContinuousClock.Instant,
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
