import Foundation
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
///
/// Its concerns are split by file: this one sends a request on the kept-alive connection;
/// `PlainHTTPTransport+Sockets.swift` resolves, connects, writes and waits under the deadline;
/// `PlainHTTPTransport+Answers.swift` reads and frames the answer. The members are internal so that
/// those extensions can use them; nothing outside this type calls them.
public final class PlainHTTPTransport: EventTransport {
    let host: String
    let port: UInt16
    let pathPrefix: String
    let timeout: Duration
    let queue = DispatchQueue(label: "AdTallyClient.PlainHTTPTransport")
    /// The kept-alive connection, -1 when there is none. Only the queue opens and closes it; a
    /// cancellation shuts it down from elsewhere to wake a blocked `poll`.
    let connection = Lock<Int32>(-1)

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

    struct Failure: Error {
        let description: String
        /// The connection ended before any byte of an answer.
        var beforeAnswer = false
    }

    func exchange(_ request: TransportRequest, cancelled: CancellationFlag) -> TransportResult {
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

    func dropConnection() {
        let fd = connection.withLock { fd -> Int32 in
            defer { fd = -1 }
            return fd
        }
        if fd >= 0 { close(fd) }
    }

    func encode(_ request: TransportRequest) -> [UInt8] {
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
}


/// Set once, from a cancellation handler, and read by the queue's blocking loops.
final class CancellationFlag: Sendable {
    private let value = AtomicBool(false)

    func set() { value.store(true) }
    var isSet: Bool { value.load() }
}
