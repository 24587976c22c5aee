/// Reads the results of a `POST /v1/events` answer straight from its bytes when it has the shape
/// AdTally writes (an object of integers and a `results` array of flat objects of plain strings):
/// `JSONSerialization` spends more time on an answer than the tracker spends on the rest of its
/// batch. Anything else (escapes, nesting, other value types) returns nil, and the caller reads the
/// answer with the general parser, which defines the result.
enum AnswerScanner {
    /// One entry of `results`: the members the tracker reads (others are ignored).
    struct Result: Equatable {
        var eventID: String?
        /// The scanner's `event_id`: its bytes in the answer, compared in place (no `String` made).
        var eventIDBytes: ArraySlice<UInt8>?
        var status: String?
        var reason: String?
        var field: String?
        var message: String?

        /// The `event_id`, however it was read.
        var id: String? { eventIDBytes.map { String(decoding: $0, as: UTF8.self) } ?? eventID }

        /// Whether the `event_id` is `expected` (lower-case UUID bytes).
        func hasID(_ expected: [UInt8]) -> Bool {
            if let eventIDBytes { return eventIDBytes.elementsEqual(expected) }
            return eventID.map { $0.utf8.elementsEqual(expected) } ?? false
        }

        mutating func set(_ key: String, _ value: String) {
            switch key {
            case "event_id": eventID = value
            case "status": status = value
            case "reason": reason = value
            case "field": field = value
            case "message": message = value
            default: break
            }
        }
    }

    static func results(_ bytes: [UInt8]) -> [Result]? {
        var scanner = Cursor(bytes: bytes)
        var results: [Result]?
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        if scanner.take(UInt8(ascii: "}")) { return nil }
        repeat {
            guard let key = scanner.string(), scanner.take(UInt8(ascii: ":")) else { return nil }
            if key == "results" {
                guard results == nil, let array = scanner.resultArray() else { return nil }
                results = array
            } else {
                guard scanner.integer() else { return nil }
            }
        } while scanner.take(UInt8(ascii: ","))
        guard scanner.take(UInt8(ascii: "}")), scanner.atEnd else { return nil }
        return results
    }

    private struct Cursor {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        mutating func skipSpace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string without escapes (nil for anything else, escapes included).
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    defer { index += 1 }
                    return String(decoding: bytes[start..<index], as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                index += 1
            }
            return nil
        }

        /// A string without escapes, as its bytes.
        mutating func rawString() -> ArraySlice<UInt8>? {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            var end = index + 1
            while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
                if bytes[end] == UInt8(ascii: "\\") || bytes[end] < 0x20 { return nil }
                end += 1
            }
            guard end < bytes.count else { return nil }
            defer { index = end + 1 }
            return bytes[(index + 1)..<end]
        }

        mutating func integer() -> Bool {
            skipSpace()
            let start = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            return index > start
        }

        mutating func null() -> Bool {
            skipSpace()
            guard bytes.count - index >= 4, bytes[index..<index + 4].elementsEqual("null".utf8) else { return false }
            index += 4
            return true
        }

        mutating func resultArray() -> [Result]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            var results: [Result] = []
            if take(UInt8(ascii: "]")) { return results }
            repeat {
                guard take(UInt8(ascii: "{")) else { return nil }
                var result = Result()
                if !take(UInt8(ascii: "}")) {
                    repeat {
                        guard let key = string(), take(UInt8(ascii: ":")) else { return nil }
                        if key == "event_id", let raw = rawString() {
                            result.eventIDBytes = raw
                        } else if let value = string() {
                            result.set(key, value)
                        } else if !null() {
                            return nil
                        }
                    } while take(UInt8(ascii: ","))
                    guard take(UInt8(ascii: "}")) else { return nil }
                }
                results.append(result)
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "]")) else { return nil }
            return results
        }
    }
}
