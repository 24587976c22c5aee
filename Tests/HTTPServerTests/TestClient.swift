import Glibc
import HTTP
@testable import HTTPServer
import Runtime
import TestSupport

/// A blocking loopback client over raw POSIX sockets, with a receive timeout so that a test waiting
/// for bytes (or EOF) fails after a bound instead of hanging.
final class TestClient {
    struct Response {
        let status: Int
        let headers: HTTPHeaders
        let body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    let fd: Int32
    private var buffer: [UInt8] = []

    /// A connection to 127.0.0.1:`port`, from the loopback address `from` when given (Linux routes
    /// all of 127.0.0.0/8 to the loopback device, so each is a peer of its own).
    init(port: Int, receiveTimeout: Double = 5, from: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket") }
        var tv = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if let from {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(from)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                Glibc.close(fd)
                throw Failure(description: "bind to \(from): \(errno)")
            }
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard r == 0 else {
            Glibc.close(fd)
            throw Failure(description: "connect: \(errno)")
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send failed: \(errno)") }
            offset += n
        }
    }

    /// Closes the write side (the server sees EOF after what was sent).
    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads more bytes into the buffer; false on EOF. Throws on timeout or error.
    @discardableResult
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 {
            buffer.append(contentsOf: chunk[0..<n])
            return true
        }
        if n == 0 { return false }
        if errno == ECONNRESET { return false }
        throw Failure(description: "recv timed out or failed: errno \(errno)")
    }

    private func readLine() throws -> String {
        while true {
            if let i = buffer.firstIndex(of: 10), i > 0, buffer[i - 1] == 13 {
                let line = String(decoding: buffer[0..<(i - 1)], as: UTF8.self)
                buffer.removeFirst(i + 1)
                return line
            }
            guard try fill() else { throw Failure(description: "EOF while reading a line") }
        }
    }

    private func readExactly(_ n: Int) throws -> [UInt8] {
        while buffer.count < n {
            guard try fill() else { throw Failure(description: "EOF while reading \(n) bytes") }
        }
        let out = Array(buffer[0..<n])
        buffer.removeFirst(n)
        return out
    }

    /// Reads one response (status line, headers, body by Content-Length or chunked). The answer
    /// to a `HEAD` request (`bodyless`) ends with its head, whatever its framing headers say.
    func readResponse(bodyless: Bool = false) throws -> Response {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0] == "HTTP/1.1", let status = Int(parts[1]) else {
            throw Failure(description: "bad status line: \(statusLine)")
        }
        var fields: [(String, String)] = []
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw Failure(description: "bad header line \(line)") }
            fields.append((String(line[..<colon]), String(line[line.index(after: colon)...].drop { $0 == " " })))
        }
        let headers = HTTPHeaders(fields)
        if status == 100 || bodyless { return Response(status: status, headers: headers, body: []) }
        var body: [UInt8] = []
        if headers["Transfer-Encoding"] == "chunked" {
            while true {
                let sizeLine = try readLine()
                guard let size = Int(sizeLine, radix: 16) else { throw Failure(description: "bad chunk size \(sizeLine)") }
                if size == 0 {
                    _ = try readLine()
                    break
                }
                body += try readExactly(size)
                _ = try readExactly(2)
            }
        } else if let length = headers["Content-Length"].flatMap({ Int($0) }) {
            body = try readExactly(length)
        } else {
            throw Failure(description: "response without framing")
        }
        return Response(status: status, headers: headers, body: body)
    }

    /// Reads until the server closes; returns the bytes that came before EOF. Throws on timeout.
    func readUntilEOF() throws -> [UInt8] {
        while try fill() {}
        defer { buffer = [] }
        return buffer
    }

    /// How the server ended a connection.
    enum End: Equatable { case closed, reset }

    /// Reads until the server ends the connection, and says how: an orderly close (`FIN`) or a
    /// reset (`RST`). Throws on timeout, or when the server sent bytes first.
    func readEnd() throws -> End {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, 0)
        if n == 0 { return .closed }
        if n < 0 && errno == ECONNRESET { return .reset }
        if n > 0 { throw Failure(description: "the server sent bytes before ending the connection") }
        throw Failure(description: "recv timed out or failed: errno \(errno)")
    }

    /// One request, one response.
    func request(_ text: String) throws -> Response {
        try send(text)
        return try readResponse()
    }
}

/// Starts a server on 127.0.0.1 port 0 with `router`, runs `body`, then shuts it down.
func withServer(_ configuration: ServerConfiguration = ServerConfiguration(), router: Router,
                observer: (any HTTPServerObserver)? = nil, logger: Logger = .discarding,
                _ body: (HTTPServer, Int) throws -> Void) throws {
    var c = configuration
    c.host = "127.0.0.1"
    c.port = 0
    let server = HTTPServer(configuration: c, router: router, observer: observer, logger: logger)
    try server.start()
    defer { server.shutdown(gracePeriod: .seconds(2)) }
    guard let port = server.boundPort else { throw TestClient.Failure(description: "no bound port") }
    try body(server, port)
}

extension ErrorBody {
    /// A product's JSON error body (the shape of AdTally's API.md one), for the tests that check
    /// the server's error answers: the server writes whatever format its router gives.
    static let testJSON = ErrorBody(contentType: "application/json") { code, message, field in
        func quote(_ s: String) -> String {
            var out = "\""
            for c in s.unicodeScalars {
                switch c {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                default: out.unicodeScalars.append(c)
                }
            }
            return out + "\""
        }
        var s = "{\"error\":{\"code\":\(quote(code)),\"message\":\(quote(message))"
        if let field { s += ",\"field\":\(quote(field))" }
        return Array((s + "}}").utf8)
    }
}

extension Router {
    /// `GET` on `pattern` answered by `handler` on a worker thread, nothing checked in the head.
    mutating func get(_ pattern: String, _ handler: @escaping HTTPHandler) { add(.get, pattern, .onWorker(handler)) }

    /// `POST` on `pattern` answered by `handler` on a worker thread, nothing checked in the head.
    mutating func post(_ pattern: String, _ handler: @escaping HTTPHandler) { add(.post, pattern, .onWorker(handler)) }

    /// `PUT` on `pattern` answered by `handler` on a worker thread, nothing checked in the head.
    mutating func put(_ pattern: String, _ handler: @escaping HTTPHandler) { add(.put, pattern, .onWorker(handler)) }
}

/// An observer from a closure.
struct ClosureObserver: HTTPServerObserver {
    private let body: @Sendable (ResponseRecord) -> Void
    /// Calls `body` for each response.
    init(_ body: @escaping @Sendable (ResponseRecord) -> Void) { self.body = body }
    func didRespond(_ record: ResponseRecord) { body(record) }
}
