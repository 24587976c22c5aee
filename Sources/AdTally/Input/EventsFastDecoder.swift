import Foundation

/// The common shape of an events body, decoded straight from its bytes into rule 1's members,
/// without building a `JSONValue` tree and a dictionary per event (that was about a tenth of the
/// server's CPU per event under load).
///
/// It takes only bodies whose meaning is plain: one event object, or an object whose only member is
/// `events`, an array of 1 to 500 event objects; member names and string values printable ASCII
/// without escapes; no member of an event repeated; values strings, numbers, `null`, `true` or
/// `false` (unknown members are skipped; `true`/`false` only there). Anything else, valid or not,
/// makes it answer `nil`, and the caller runs the general parser, which is the one that defines
/// every answer. On what it takes it must agree with the general path exactly: a test compares the
/// two on generated and mutated bodies.
enum EventsFastDecoder {
    static func decode(_ body: UnsafeBufferPointer<UInt8>, now: Timestamp) -> EventsRequest? {
        var reader = FastReader(bytes: body)
        return reader.document(now: now)
    }
}

/// One pass over a body. Every method returns `nil` (or false) as soon as the body leaves the shape
/// it handles, which is not an error: the general parser takes over.
private struct FastReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    mutating func document(now: Timestamp) -> EventsRequest? {
        skipWhitespace()
        let start = index
        guard consume(UInt8(ascii: "{")) else { return nil }
        skipWhitespace()
        // A batch: `events` is the first and only member of the top-level object.
        if let name = key(), Self.equal(name, "events") {
            guard colon(), consume(UInt8(ascii: "[")) else { return nil }
            var candidates: [EventCandidate] = []
            candidates.reserveCapacity(64)
            repeat {
                skipWhitespace()
                guard candidates.count < EventsRequest.maximumBatchCount, let members = eventObject() else { return nil }
                candidates.append(WellFormedRule.check(members, now: now))
                skipWhitespace()
            } while consume(UInt8(ascii: ","))
            guard consume(UInt8(ascii: "]")) else { return nil }
            skipWhitespace()
            guard consume(UInt8(ascii: "}")), atEnd() else { return nil }
            return EventsRequest(candidates: candidates, isBatch: true)
        }
        // A single event: read the object again from its brace.
        index = start
        guard let members = eventObject(), atEnd() else { return nil }
        return EventsRequest(candidates: [WellFormedRule.check(members, now: now)], isBatch: false)
    }

    /// An event object, with `index` at its `{`.
    mutating func eventObject() -> EventMembers? {
        guard consume(UInt8(ascii: "{")) else { return nil }
        var members = EventMembers()
        var seen: UInt16 = 0
        skipWhitespace()
        if consume(UInt8(ascii: "}")) { return members }
        repeat {
            skipWhitespace()
            guard let name = key(), colon() else { return nil }
            let member = Self.member(named: name)
            // `events` inside what would be a single event makes the body a batch (or malformed).
            if member == nil, Self.equal(name, "events") { return nil }
            if let member {
                // A repeated member: the general parser's last-wins rule decides.
                guard seen & (1 << member) == 0 else { return nil }
                seen |= 1 << member
            }
            guard let value = scalar(keep: member != nil) else { return nil }
            if let member { members.set(member, value) }
            skipWhitespace()
        } while consume(UInt8(ascii: ","))
        guard consume(UInt8(ascii: "}")) else { return nil }
        return members
    }

    /// A member name, with `index` at its opening quote; the bytes between the quotes.
    mutating func key() -> UnsafeBufferPointer<UInt8>? {
        guard consume(UInt8(ascii: "\"")) else { return nil }
        return stringBody()
    }

    /// Whitespace, a colon, whitespace.
    mutating func colon() -> Bool {
        skipWhitespace()
        guard consume(UInt8(ascii: ":")) else { return false }
        skipWhitespace()
        return true
    }

    /// The bytes up to the closing quote, when all are printable ASCII other than `\`; `index` after the quote.
    mutating func stringBody() -> UnsafeBufferPointer<UInt8>? {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                return UnsafeBufferPointer(rebasing: bytes[start..<(index - 1)])
            }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
            index += 1
        }
        return nil
    }

    /// A string, number, `null`, `true` or `false`. `keep`: build the value (else only skip it);
    /// `true`/`false` are only skipped, as no member rule 1 reads may be a boolean.
    mutating func scalar(keep: Bool) -> JSONValue?? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            index += 1
            guard let text = stringBody() else { return nil }
            return .some(keep ? .string(String(decoding: text, as: UTF8.self)) : nil)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            guard let number = number(keep: keep) else { return nil }
            return .some(number.map(JSONValue.number))
        case UInt8(ascii: "n"):
            guard literal("null") else { return nil }
            return .some(keep ? .null : nil)
        case UInt8(ascii: "t") where !keep:
            return literal("true") ? .some(nil) : nil
        case UInt8(ascii: "f") where !keep:
            return literal("false") ? .some(nil) : nil
        default:
            return nil
        }
    }

    /// A number in RFC 8259 grammar of at most 40 bytes (longer ones are left to the general path).
    /// The outer optional: whether it was read; the inner: the value, when `keep`.
    mutating func number(keep: Bool) -> JSONNumber?? {
        let start = index
        var isInteger = true
        _ = consume(UInt8(ascii: "-"))
        if consume(UInt8(ascii: "0")) {
            // A leading zero stands alone.
        } else {
            guard digits() else { return nil }
        }
        if consume(UInt8(ascii: ".")) {
            isInteger = false
            guard digits() else { return nil }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() else { return nil }
        }
        guard index - start <= 40 else { return nil }
        guard keep else { return .some(nil) }
        let lexeme = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        return .some(JSONNumber(validatedLexeme: lexeme, isIntegerLexeme: isInteger))
    }

    /// One or more digits.
    mutating func digits() -> Bool {
        let start = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
        return index > start
    }

    mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count, Self.equal(UnsafeBufferPointer(rebasing: bytes[index..<(index + count)]), word) else { return false }
        index += count
        return true
    }

    /// Whether `bytes` are exactly `word`'s: a byte comparison (a `String.UTF8View` comparison went
    /// through generic iteration, which perf showed at almost 1% of the machine on this hot path).
    static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count == count else { return false }
        guard let base = bytes.baseAddress else { return count == 0 }
        return memcmp(base, word.utf8Start, count) == 0
    }

    mutating func consume(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Only whitespace is left.
    mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    /// The member slot a name stands for, as a bit number; nil for a member rule 1 does not read.
    static func member(named name: UnsafeBufferPointer<UInt8>) -> Int? {
        switch name.count {
        case 4: return Self.equal(name, "type") ? EventMembers.typeSlot : nil
        case 5: return Self.equal(name, "ad_id") ? EventMembers.adIDSlot : nil
        case 8:
            if Self.equal(name, "event_id") { return EventMembers.eventIDSlot }
            return Self.equal(name, "position") ? EventMembers.positionSlot : nil
        case 10:
            if Self.equal(name, "session_id") { return EventMembers.sessionIDSlot }
            return Self.equal(name, "visible_ms") ? EventMembers.visibleMillisecondsSlot : nil
        case 11:
            if Self.equal(name, "occurred_at") { return EventMembers.occurredAtSlot }
            return Self.equal(name, "snapshot_id") ? EventMembers.snapshotIDSlot : nil
        case 16: return Self.equal(name, "visible_fraction") ? EventMembers.visibleFractionSlot : nil
        default: return nil
        }
    }
}

extension EventMembers {
    static let eventIDSlot = 0, typeSlot = 1, sessionIDSlot = 2, adIDSlot = 3, occurredAtSlot = 4
    static let snapshotIDSlot = 5, positionSlot = 6, visibleFractionSlot = 7, visibleMillisecondsSlot = 8

    mutating func set(_ slot: Int, _ value: JSONValue?) {
        switch slot {
        case Self.eventIDSlot: eventID = value
        case Self.typeSlot: type = value
        case Self.sessionIDSlot: sessionID = value
        case Self.adIDSlot: adID = value
        case Self.occurredAtSlot: occurredAt = value
        case Self.snapshotIDSlot: snapshotID = value
        case Self.positionSlot: position = value
        case Self.visibleFractionSlot: visibleFraction = value
        default: visibleMilliseconds = value
        }
    }
}
