/// Writes response heads and chunk framing as bytes. Pure: the caller passes the `Date` value (see
/// `HTTPDate`), so serialization is testable byte for byte.
public enum HTTPResponseSerializer {
    /// How the body following the head is framed.
    public enum Framing: Sendable, Equatable {
        /// `Content-Length: n`.
        case contentLength(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
        /// Neither: the body ends when the connection closes (HTTP/1.0, RFC 9112 6.3 rule 8).
        case closeDelimited
    }

    /// The status line and headers, ending with the blank line. Framing headers in `headers` are
    /// dropped (the server alone decides framing), and header fields with a name that is not a token
    /// or a value holding CR, LF or NUL are dropped, so a handler cannot split a response.
    public static func head(status: HTTPStatus, headers: HTTPHeaders, framing: Framing, date: String,
                            connection: String? = nil) -> [UInt8] {
        head(capacity: 256, status: status, headers: headers, framing: framing, date: date, connection: connection)
    }

    /// As `head`, into an array reserved for `capacity` bytes (room for the body that follows).
    private static func head(capacity: Int, status: HTTPStatus, headers: HTTPHeaders, framing: Framing, date: String,
                             connection: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        out.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(&out, status.code)
        out.append(SP)
        out.append(contentsOf: status.reasonPhrase.utf8)
        out.append(CR)
        out.append(LF)
        for field in headers.fields {
            if field.name.equalsIgnoringASCIICase("Content-Length") || field.name.equalsIgnoringASCIICase("Transfer-Encoding")
                || field.name.equalsIgnoringASCIICase("Date") || field.name.equalsIgnoringASCIICase("Connection") { continue }
            guard !field.name.isEmpty, field.name.utf8.allSatisfy(ByteClass.isToken),
                  field.value.utf8.allSatisfy(ByteClass.isFieldValue) else { continue }
            appendField(&out, field.name, field.value)
        }
        switch framing {
        case .contentLength(let n):
            out.append(contentsOf: "Content-Length: ".utf8)
            appendDecimal(&out, n)
            out.append(CR)
            out.append(LF)
        case .chunked: appendField(&out, "Transfer-Encoding", "chunked")
        case .closeDelimited: break
        }
        appendField(&out, "Date", date)
        if let connection { appendField(&out, "Connection", connection) }
        out.append(CR)
        out.append(LF)
        return out
    }

    /// A whole response: head plus body with `Content-Length`.
    public static func response(status: HTTPStatus, headers: HTTPHeaders, body: [UInt8], date: String,
                                connection: String? = nil) -> [UInt8] {
        var out = head(capacity: 256 + body.count, status: status, headers: headers, framing: .contentLength(body.count), date: date, connection: connection)
        out.append(contentsOf: body)
        return out
    }

    /// One chunk of a chunked body (`size CRLF data CRLF`); empty input gives no bytes, since an empty
    /// chunk would end the body.
    public static func chunk(_ bytes: [UInt8]) -> [UInt8] {
        guard !bytes.isEmpty else { return [] }
        var out = Array(String(bytes.count, radix: 16).utf8)
        out.reserveCapacity(out.count + bytes.count + 4)
        out.append(CR)
        out.append(LF)
        out.append(contentsOf: bytes)
        out.append(CR)
        out.append(LF)
        return out
    }

    /// The last chunk and the empty trailer section.
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// The interim response for `Expect: 100-continue`.
    public static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// Appends a non-negative integer in decimal without building a `String`.
    private static func appendDecimal(_ out: inout [UInt8], _ value: Int) {
        guard value > 0 else {
            if value == 0 { out.append(UInt8(ascii: "0")) } else { out.append(contentsOf: String(value).utf8) }
            return
        }
        var v = value
        var divisor = 1
        while divisor <= v / 10 { divisor *= 10 }
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(v / divisor))
            v %= divisor
            divisor /= 10
        }
    }

    private static func appendField(_ out: inout [UInt8], _ name: String, _ value: String) {
        out.append(contentsOf: name.utf8)
        out.append(COLON)
        out.append(SP)
        out.append(contentsOf: value.utf8)
        out.append(CR)
        out.append(LF)
    }
}
