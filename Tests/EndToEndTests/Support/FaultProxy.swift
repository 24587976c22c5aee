import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP proxy in front of the server under test that misbehaves on demand, for the client
/// tests: it answers `503` itself, forwards a request and loses the answer after the server has
/// committed it, or holds requests or answers until told otherwise. It speaks just enough HTTP/1.1
/// for `POST /v1/events` and `GET /healthz` (`Content-Length` bodies, keep-alive).
///
/// `@unchecked Sendable`: every mutable property is only touched while holding `condition`.
final class FaultProxy: @unchecked Sendable {
    enum Mode: Equatable, Sendable {
        /// Pass requests and answers through.
        case forward
        /// Answer `503 unavailable` with `Retry-After: 1`, as AdTally does while its database is gone.
        case unavailable
        /// Forward a `POST /v1/events`, read the server's answer, and close the client's connection
        /// without it (other requests pass).
        case loseAnswers
        /// Keep requests, unforwarded, until the mode changes.
        case holdRequests
        /// Forward requests, but keep the answers to `POST /v1/events` until the mode changes.
        case holdAnswers
    }

    /// A request the proxy received.
    struct Seen {
        let method: String
        let path: String
        let body: Data
    }

    let port: Int
    private let listener: Int32
    private let condition = NSCondition()
    private var mode: Mode
    /// After this many `POST /v1/events` requests, switch to the mode given with it.
    private var switchAfter: (count: Int, mode: Mode)?
    private var upstreamPort: Int
    private var seen: [Seen] = []
    private var forwardedEvents = 0
    private var unavailableCount = 0
    private var openSockets = Set<Int32>()
    private var stopped = false

    init(upstreamPort: Int, mode: Mode = .forward) throws {
        self.upstreamPort = upstreamPort
        self.mode = mode
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw HTTPClientError(description: "socket: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(listener, pointer, length) == 0, listen(listener, 64) == 0 else { return -1 }
                return getsockname(listener, pointer, &length)
            }
        }
        guard bound == 0 else {
            close(listener)
            throw HTTPClientError(description: "proxy bind/listen: errno \(errno)")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// The URL a tracker should use.
    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    func setMode(_ mode: Mode, after eventRequests: Int? = nil) {
        condition.lock()
        if let eventRequests {
            switchAfter = (eventRequests, mode)
            forwardedEvents = 0
        } else {
            self.mode = mode
            switchAfter = nil
        }
        condition.broadcast()
        condition.unlock()
    }

    func setUpstream(port: Int) {
        condition.lock(); upstreamPort = port; condition.unlock()
    }

    /// Every request received so far.
    var requests: [Seen] {
        condition.lock(); defer { condition.unlock() }
        return seen
    }

    var eventRequests: [Seen] { requests.filter { $0.path == "/v1/events" } }

    /// How many requests the proxy answered `503` itself.
    var answeredUnavailable: Int {
        condition.lock(); defer { condition.unlock() }
        return unavailableCount
    }

    /// Waits until `count` `POST /v1/events` requests arrived; false at the deadline.
    func waitForEventRequests(_ count: Int, timeout: TimeInterval = 30) -> Bool {
        waitForRequests(count, path: "/v1/events", timeout: timeout)
    }

    /// Waits until `count` requests (to `path`, if given) arrived; false at the deadline.
    func waitForRequests(_ count: Int, path: String? = nil, timeout: TimeInterval = 30) -> Bool {
        let deadline = Date() + timeout
        condition.lock(); defer { condition.unlock() }
        while seen.filter({ path == nil || $0.path == path }).count < count {
            if Date() >= deadline { return false }
            _ = condition.wait(until: deadline)
        }
        return true
    }

    func stop() {
        condition.lock()
        stopped = true
        for fd in openSockets { shutdown(fd, Int32(SHUT_RDWR)) }
        condition.broadcast()
        condition.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit {
        stop()
        close(listener)
    }

    // MARK: Connections

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            condition.lock()
            if stopped { condition.unlock(); close(client); return }
            openSockets.insert(client)
            condition.unlock()
            Thread { [self] in serve(client) }.start()
        }
    }

    private func track(_ fd: Int32) {
        condition.lock(); openSockets.insert(fd); condition.unlock()
    }

    private func forget(_ fd: Int32) {
        condition.lock(); openSockets.remove(fd); condition.unlock()
        close(fd)
    }

    /// The mode for the request just received, honouring a pending switch.
    private func modeForNewRequest(_ request: Seen) -> Mode {
        condition.lock(); defer { condition.unlock() }
        seen.append(request)
        condition.broadcast()
        if request.path == "/v1/events", let pending = switchAfter {
            if forwardedEvents >= pending.count {
                mode = pending.mode
                switchAfter = nil
            }
            forwardedEvents += 1
        }
        if request.path != "/v1/events", mode == .loseAnswers || mode == .holdAnswers { return .forward }
        return mode
    }

    /// Blocks while the mode is `held`; returns the mode that ended the wait (nil: stopped).
    private func waitWhile(_ held: Mode) -> Mode? {
        condition.lock(); defer { condition.unlock() }
        while mode == held, !stopped { _ = condition.wait(until: Date() + 1) }
        return stopped ? nil : mode
    }

    private func serve(_ client: Int32) {
        var upstream: Int32 = -1
        var buffer = Data()
        defer {
            forget(client)
            if upstream >= 0 { forget(upstream) }
        }
        while let (request, raw) = Self.readMessage(client, &buffer, isRequest: true) {
            var mode = modeForNewRequest(request)
            if mode == .holdRequests { guard let next = waitWhile(.holdRequests) else { return }; mode = next }
            if mode == .unavailable {
                condition.lock(); unavailableCount += 1; condition.unlock()
                guard Self.writeAll(client, Self.unavailableAnswer()) else { return }
                continue
            }
            if upstream < 0 {
                condition.lock(); let port = upstreamPort; condition.unlock()
                guard let fd = try? Loopback.connect(port: port) else { return } // the server is down
                upstream = fd
                track(fd)
            }
            var answerBuffer = Data()
            guard Self.writeAll(upstream, raw), let (_, answer) = Self.readMessage(upstream, &answerBuffer, isRequest: false) else {
                return
            }
            if mode == .loseAnswers { return }
            if mode == .holdAnswers { guard waitWhile(.holdAnswers) != nil else { return } }
            guard Self.writeAll(client, answer) else { return }
        }
    }

    private static func unavailableAnswer() -> Data {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let body = #"{"error":{"code":"unavailable","message":"the proxy says the database is unreachable"}}"#
        return Data(("HTTP/1.1 503 Service Unavailable\r\nDate: \(formatter.string(from: Date()))\r\nRetry-After: 1\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)").utf8)
    }

    /// One whole message (head and `Content-Length` body) from `fd`, with its raw bytes; nil at the
    /// end of the connection or on an error.
    private static func readMessage(_ fd: Int32, _ buffer: inout Data, isRequest: Bool) -> (Seen, Data)? {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if let end = buffer.range(of: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: buffer[buffer.startIndex..<end.lowerBound], as: UTF8.self)
                let lines = head.components(separatedBy: "\r\n")
                var length = 0
                for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
                }
                let total = end.upperBound - buffer.startIndex + length
                if buffer.count >= total {
                    let raw = Data(buffer.prefix(total))
                    let body = Data(buffer[end.upperBound..<(buffer.startIndex + total)])
                    buffer = Data(buffer.dropFirst(total))
                    let parts = lines[0].split(separator: " ")
                    let seen = Seen(method: isRequest ? String(parts.first ?? "") : "",
                                    path: isRequest && parts.count > 1 ? String(parts[1]) : "", body: body)
                    return (seen, raw)
                }
            }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { buffer.append(contentsOf: chunk[0..<count]); continue }
            if count < 0, errno == EINTR { continue }
            return nil
        }
    }

    private static func writeAll(_ fd: Int32, _ data: Data) -> Bool {
        var sent = 0
        while sent < data.count {
            let count = data[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 { sent += count; continue }
            if count < 0, errno == EINTR { continue }
            return false
        }
        return true
    }
}
