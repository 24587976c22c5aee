import Foundation

#if canImport(Glibc)
import Glibc
#endif

struct HTTPClientError: Error, CustomStringConvertible {
    let description: String
}

struct HTTPResponse {
    let status: Int
    let headers: [(name: String, value: String)]
    let body: Data

    /// The first header of that name (case-insensitive).
    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object, or nil.
    var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }

    /// `error.code`, `error.field` of an error body.
    var errorCode: String? { (json?["error"] as? [String: Any])?["code"] as? String }
    var errorField: String? { (json?["error"] as? [String: Any])?["field"] as? String }
    var errorMessage: String? { (json?["error"] as? [String: Any])?["message"] as? String }
}

/// One request per connection (`Connection: close`), read to end of file: the most predictable
/// client for tests. Every socket operation has a timeout.
enum HTTPClient {
    static func request(port: Int, method: String, path: String, headers: [(String, String)] = [],
                        body: Data? = nil, timeout: Int = 15) throws -> HTTPResponse {
        let fd = try Loopback.connect(port: port)
        defer { close(fd) }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))

        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        var outgoing = Data(head.utf8)
        if let body { outgoing.append(body) }
        var sent = 0
        while sent < outgoing.count {
            let count = outgoing.withUnsafeBytes { send(fd, $0.baseAddress! + sent, outgoing.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw HTTPClientError(description: "send: errno \(errno)") }
            sent += count
        }

        var incoming = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { incoming.append(contentsOf: buffer[0..<count]); continue }
            if count == 0 { break }
            if errno == EINTR { continue }
            throw HTTPClientError(description: "recv: errno \(errno) after \(incoming.count) bytes")
        }
        return try parse(incoming)
    }

    static func parse(_ data: Data) throws -> HTTPResponse {
        let separator = Data("\r\n\r\n".utf8)
        guard let end = data.range(of: separator) else {
            throw HTTPClientError(description: "no complete response head in \(data.count) bytes: \(String(decoding: data, as: UTF8.self).prefix(300))")
        }
        let headText = String(decoding: data[data.startIndex..<end.lowerBound], as: UTF8.self)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let statusParts = statusLine.split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            throw HTTPClientError(description: "bad status line: \(statusLine)")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw HTTPClientError(description: "bad header: \(line)") }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var body = Data(data[end.upperBound...])
        let response = HTTPResponse(status: status, headers: headers, body: body)
        if let length = response.header("Content-Length").flatMap(Int.init) {
            guard body.count >= length else { throw HTTPClientError(description: "body shorter than Content-Length \(length): \(body.count)") }
            body = body.prefix(length)
        } else if response.header("Transfer-Encoding")?.lowercased() == "chunked" {
            body = try dechunk(body)
        }
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    static func dechunk(_ data: Data) throws -> Data {
        var output = Data()
        var rest = data[...]
        let crlf = Data("\r\n".utf8)
        while true {
            guard let lineEnd = rest.range(of: crlf) else { throw HTTPClientError(description: "bad chunk") }
            let sizeText = String(decoding: rest[rest.startIndex..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { throw HTTPClientError(description: "bad chunk size") }
            rest = rest[lineEnd.upperBound...]
            if size == 0 { return output }
            guard rest.count >= size + 2 else { throw HTTPClientError(description: "short chunk") }
            output.append(rest.prefix(size))
            rest = rest.dropFirst(size + 2)
        }
    }
}

/// JSON request bodies and helpers shared by the tests.
enum Body {
    static func json(_ object: Any) -> Data {
        // Force-try: test literals only.
        try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    static let jsonType = ("Content-Type", "application/json")
    static let auth = ("Authorization", "Bearer \(ServerProcess.adminToken)")

    /// Now, RFC 3339 in UTC.
    static func now() -> String { Date().ISO8601Format() }

    static func event(_ type: String, session: String, ad: String, id: String = UUID().uuidString,
                      snapshot: String? = nil, position: Int? = nil) -> [String: Any] {
        var event: [String: Any] = ["event_id": id, "type": type, "session_id": session, "ad_id": ad, "occurred_at": now()]
        if let snapshot { event["snapshot_id"] = snapshot }
        if let position { event["position"] = position }
        return event
    }

    static func ad(_ id: String, _ position: Int, _ advertiser: String, _ url: String = "https://example.com/landing") -> [String: Any] {
        ["ad_id": id, "position": position, "advertiser_id": advertiser, "url": url]
    }
}

extension ISO8601DateFormatter {
    /// Reads the contract's timestamps (`2026-11-29T13:47:00.250Z`).
    static var milliseconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
