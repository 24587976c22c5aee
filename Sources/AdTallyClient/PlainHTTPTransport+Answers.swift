import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension PlainHTTPTransport {
    /// may carry the next request.
    func readResponse(_ fd: Int32, method: String, deadline: ContinuousClock.Instant,
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
    struct ResponseHead {
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
    struct SocketReader {
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
