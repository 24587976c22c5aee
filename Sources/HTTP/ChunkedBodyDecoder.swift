/// Decodes a `Transfer-Encoding: chunked` body (RFC 9112 section 7.1), chunk extensions and trailer
/// fields included (both are checked for syntax and then dropped).
///
/// Resumable so that a body arriving in many reads is decoded in linear time: give `decode` the raw
/// body bytes received so far, always starting at the first body byte; it remembers how far it got.
/// A fresh decoder over the same bytes gives the same answer, so it is still a function of the bytes.
/// Framing overhead is bounded too: raw bytes beyond twice the body limit plus 64 KiB are `413`, so
/// one-byte chunks cannot make the connection buffer grow without bound.
public struct ChunkedBodyDecoder: Sendable {
    private enum Phase: Sendable {
        case size
        case data(remaining: Int)
        case dataEnd
        case trailers
    }

    /// The limits enforced (body size, trailer size).
    public let limits: ParserLimits
    private var phase: Phase = .size
    private var offset = 0
    private var body: [UInt8] = []
    private var trailerBytes = 0

    /// The longest chunk-size line accepted (size plus extensions).
    static let maxSizeLineBytes = 4096

    /// A decoder at the start of a body.
    public init(limits: ParserLimits = ParserLimits()) { self.limits = limits }

    /// Decodes as far as `bytes` allow. `bytes` must start at the first byte of the body and hold at
    /// least the bytes given on the previous call.
    public mutating func decode(_ bytes: ArraySlice<UInt8>) -> BodyParseResult {
        bytes.withUnsafeBufferPointer { decode(buffer: $0) }
    }

    private mutating func decode(buffer b: UnsafeBufferPointer<UInt8>) -> BodyParseResult {
        let n = b.count
        func bad(_ reason: String) -> BodyParseResult { .invalid(HTTPParseError(.badRequest, reason)) }
        let tooLarge = BodyParseResult.invalid(HTTPParseError(.payloadTooLarge, "chunked body over \(limits.maxBodyBytes) bytes"))
        let maxRaw = limits.maxBodyBytes.multipliedReportingOverflow(by: 2).partialValue &+ 65536
        if offset > n { return bad("decoder fed fewer bytes than before") }

        while true {
            if offset > maxRaw { return tooLarge }
            switch phase {
            case .size:
                var i = offset
                var size = 0
                while i < n, let d = PercentDecoding.hexValue(b[i]) {
                    // Checked before it can overflow: more than the remaining allowance is 413 at once.
                    size = size &* 16 &+ Int(d)
                    if size > limits.maxBodyBytes - body.count { return tooLarge }
                    i += 1
                }
                guard i < n else { return n - offset > Self.maxSizeLineBytes ? bad("chunk size line too long") : .incomplete }
                guard i > offset else { return bad("invalid chunk size") }
                // chunk-ext: BWS ";" ... up to CRLF, no control characters.
                var j = i
                while j < n, b[j] == SP || b[j] == HTAB { j += 1 }
                if j < n, b[j] != CR, b[j] != SEMICOLON { return bad("invalid chunk size") }
                while j < n, b[j] != CR {
                    guard ByteClass.isFieldValue(b[j]) else { return bad("control character in chunk extension") }
                    j += 1
                }
                if j - offset > Self.maxSizeLineBytes { return bad("chunk size line too long") }
                guard j + 1 < n else { return .incomplete }
                guard b[j + 1] == LF else { return bad("bare CR in chunk size line") }
                offset = j + 2
                phase = size == 0 ? .trailers : .data(remaining: size)
            case .data(let remaining):
                let available = min(remaining, n - offset)
                if available > 0 {
                    body.append(contentsOf: UnsafeBufferPointer(rebasing: b[offset..<(offset + available)]))
                    offset += available
                }
                guard available == remaining else {
                    phase = .data(remaining: remaining - available)
                    return .incomplete
                }
                phase = .dataEnd
            case .dataEnd:
                guard offset + 1 < n else {
                    if offset < n, b[offset] != CR { return bad("chunk data not followed by CRLF") }
                    return .incomplete
                }
                guard b[offset] == CR, b[offset + 1] == LF else { return bad("chunk data not followed by CRLF") }
                offset += 2
                phase = .size
            case .trailers:
                // trailer-section: *( field-line CRLF ) CRLF
                guard offset < n else { return .incomplete }
                if b[offset] == CR {
                    guard offset + 1 < n else { return .incomplete }
                    guard b[offset + 1] == LF else { return bad("bare CR after trailers") }
                    return .complete(body, consumed: offset + 2)
                }
                var i = offset
                while i < n, ByteClass.isToken(b[i]) { i += 1 }
                guard i < n else { return trailerNeedMore(n - offset) }
                guard i > offset, b[i] == COLON else { return bad("malformed trailer field") }
                i += 1
                while i < n, b[i] != CR {
                    guard ByteClass.isFieldValue(b[i]) else { return bad("control character in trailer field") }
                    i += 1
                }
                guard i + 1 < n else { return trailerNeedMore(n - offset) }
                guard b[i + 1] == LF else { return bad("bare CR in trailer field") }
                trailerBytes += i + 2 - offset
                if trailerBytes > limits.maxHeadBytes {
                    return .invalid(HTTPParseError(.headersTooLarge, "trailer section over \(limits.maxHeadBytes) bytes"))
                }
                offset = i + 2
            }
        }
    }

    private func trailerNeedMore(_ pending: Int) -> BodyParseResult {
        trailerBytes + pending > limits.maxHeadBytes
            ? .invalid(HTTPParseError(.headersTooLarge, "trailer section over \(limits.maxHeadBytes) bytes"))
            : .incomplete
    }
}

let SEMICOLON: UInt8 = 0x3B
