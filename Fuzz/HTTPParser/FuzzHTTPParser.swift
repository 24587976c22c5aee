// libFuzzer entry for the HTTP request parser (compiled with Sources/HTTP/*.swift as one module by
// scripts/fuzz). Beyond "no crash", it checks invariants of a pure, stateless parser:
//  - a complete request consumed 0 < consumed <= bytes.count;
//  - the same request re-fed with extra (pipelined) bytes after it gives the same result;
//  - every proper prefix of a complete request is .incomplete (never complete earlier, never refused);
//  - a prefix that is refused stays refused once more bytes arrive;
//  - a chunked body decoded incrementally by one ChunkedBodyDecoder equals the one-shot answer.
// Each invariant is checked under the default limits and under tight limits, so limit paths run too.

let tightLimits = ParserLimits(maxHeadBytes: 512, maxTargetBytes: 128, maxHeaderCount: 6, maxBodyBytes: 256)
let parsers = [HTTPRequestParser(limits: ParserLimits()), HTTPRequestParser(limits: tightLimits)]

/// A comparable rendering of a parse result (the result types are not Equatable).
func describe(_ r: RequestParseResult) -> String {
    switch r {
    case .incomplete: return "incomplete"
    case .invalid(let e): return "invalid \(e.status.code)"
    case .complete(let req, let consumed):
        return "complete \(consumed) " + describe(req.head) + " body=\(req.body)"
    }
}

func describe(_ h: HTTPRequestHead) -> String {
    var s = "\(h.method.rawValue)|\(h.target)|\(h.path)|\(h.pathSegments)|\(h.rawQuery ?? "<nil>")|"
    s += "\(h.version)|\(h.bodyFraming)|\(h.keepAlive)|\(h.expectsContinue)|\(h.hasBody)|"
    for f in h.headers { s += "\(f.name):\(f.value);" }
    return s
}

func describe(_ r: BodyParseResult) -> String {
    switch r {
    case .incomplete: return "incomplete"
    case .invalid(let e): return "invalid \(e.status.code)"
    case .complete(let body, let consumed): return "complete \(consumed) \(body)"
    }
}

func isInvalid(_ r: RequestParseResult) -> Bool { if case .invalid = r { return true }; return false }

/// The prefix lengths to try: all of them for small inputs, a spread plus the edges otherwise.
func prefixLengths(below n: Int) -> [Int] {
    if n <= 1024 { return Array(0..<n) }
    var ks = Set<Int>()
    for k in 0..<64 { ks.insert(k) }
    for k in stride(from: 0, to: n, by: max(1, n / 128)) { ks.insert(k) }
    for k in max(0, n - 64)..<n { ks.insert(k) }
    return ks.sorted()
}

func check(_ parser: HTTPRequestParser, _ bytes: [UInt8]) {
    let whole = parser.parse(bytes)
    let wholeText = describe(whole)

    // Slices that do not start at index 0 must parse the same (the parser works on slices).
    var padded: [UInt8] = [0x58, 0x58, 0x58]
    padded.append(contentsOf: bytes)
    let sliced = parser.parse(padded[3...])
    precondition(describe(sliced) == wholeText, "slice not at 0 parses differently: \(describe(sliced)) vs \(wholeText)")

    // Head-only parse agrees with the whole parse.
    switch parser.parseHead(bytes) {
    case .complete(let head, let headLength):
        precondition(headLength > 0 && headLength <= bytes.count, "head consumed \(headLength) of \(bytes.count)")
        if case .complete(let req, let consumed) = whole {
            precondition(describe(req.head) == describe(head), "parse and parseHead disagree on the head")
            precondition(consumed >= headLength, "request consumed \(consumed) < head \(headLength)")
        }
        // Incremental chunked decoding with one resumable decoder equals the one-shot answer.
        if head.bodyFraming == .chunked, parser.checkBodySize(head) == nil {
            let body = bytes[headLength...]
            let oneShot = describe(parser.parseBody(head, body))
            var decoder = ChunkedBodyDecoder(limits: parser.limits)
            var last = "incomplete"
            let step = body.count > 2048 ? max(1, body.count / 512) : 1
            var end = body.startIndex
            while true {
                last = describe(decoder.decode(body[body.startIndex..<end]))
                if last != "incomplete" || end == body.endIndex { break }
                end = min(body.endIndex, end + step)
            }
            precondition(last == oneShot, "resumed chunked decode \(last) vs one-shot \(oneShot)")
        }
    case .incomplete:
        if case .complete = whole { preconditionFailure("parseHead incomplete but parse complete") }
    case .invalid(let e):
        if case .invalid(let e2) = whole {
            precondition(e.status.code == e2.status.code, "parseHead \(e.status.code) vs parse \(e2.status.code)")
        } else {
            preconditionFailure("parseHead invalid but parse \(wholeText)")
        }
    }

    switch whole {
    case .complete(_, let consumed):
        precondition(consumed > 0 && consumed <= bytes.count, "consumed \(consumed) of \(bytes.count)")
        // Exactly the request, and the request followed by more bytes, give the same answer.
        let exact = describe(parser.parse(Array(bytes[..<consumed])))
        precondition(exact == wholeText, "request alone parses as \(exact), with trailing bytes as \(wholeText)")
        for extra: [UInt8] in [Array("GET / HTTP/1.1\r\n\r\n".utf8), [0x00, 0xFF, 0x0D], Array(repeating: 0x41, count: 300)] {
            let more = describe(parser.parse(bytes + extra))
            precondition(more == wholeText, "extra bytes change the answer: \(more) vs \(wholeText)")
        }
        // No proper prefix of the request is anything but incomplete.
        for k in prefixLengths(below: consumed) {
            let p = parser.parse(Array(bytes[..<k]))
            guard case .incomplete = p else {
                preconditionFailure("prefix \(k) of a complete \(consumed)-byte request answers \(describe(p))")
            }
        }
    case .incomplete:
        // An incomplete input has no refused and no complete prefix.
        for k in prefixLengths(below: bytes.count) {
            let p = parser.parse(Array(bytes[..<k]))
            guard case .incomplete = p else {
                preconditionFailure("prefix \(k) answers \(describe(p)) but the whole input is incomplete")
            }
        }
    case .invalid:
        // Once refused, always refused; and no prefix was a complete request.
        for k in prefixLengths(below: bytes.count) {
            let p = parser.parse(Array(bytes[..<k]))
            if case .complete = p { preconditionFailure("prefix \(k) complete but the whole input is refused: \(wholeText)") }
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for parser in parsers { check(parser, bytes) }
    return 0
}
