/// Swift source with its comments and the contents of its string literals replaced by spaces
/// (newlines kept), so that a scan of the code sees neither prose nor text, and every offset and
/// line number stays where it was. String interpolations are code and are kept. It knows what the
/// scanner needs: line and nested block comments, single-line, multi-line and raw strings.
enum SwiftCodeText {
    static func blankingCommentsAndStrings(_ source: String) -> String {
        var scanner = Scanner(bytes: Array(source.utf8))
        scanner.code(untilCloseParen: false)
        return String(decoding: scanner.bytes, as: UTF8.self)
    }

    private struct Scanner {
        var bytes: [UInt8]
        var index = 0

        private static let quote = UInt8(ascii: "\""), hash = UInt8(ascii: "#"), slash = UInt8(ascii: "/")
        private static let star = UInt8(ascii: "*"), backslash = UInt8(ascii: "\\"), newline = UInt8(ascii: "\n")

        init(bytes: [UInt8]) { self.bytes = bytes }

        private func at(_ offset: Int) -> UInt8? {
            index + offset < bytes.count ? bytes[index + offset] : nil
        }

        private mutating func blank(_ position: Int) {
            if bytes[position] != Self.newline { bytes[position] = UInt8(ascii: " ") }
        }

        /// Code up to the end, or (in an interpolation) up to the parenthesis that closes it.
        mutating func code(untilCloseParen: Bool) {
            var depth = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == Self.slash, at(1) == Self.slash {
                    while index < bytes.count, bytes[index] != Self.newline { blank(index); index += 1 }
                } else if byte == Self.slash, at(1) == Self.star {
                    blockComment()
                } else if byte == Self.quote || (byte == Self.hash && rawStringAhead()) {
                    string()
                } else if untilCloseParen, byte == UInt8(ascii: "(") {
                    depth += 1
                    index += 1
                } else if untilCloseParen, byte == UInt8(ascii: ")") {
                    if depth == 0 { return }
                    depth -= 1
                    index += 1
                } else {
                    index += 1
                }
            }
        }

        private mutating func blockComment() {
            var depth = 0
            while index < bytes.count {
                if bytes[index] == Self.slash, at(1) == Self.star {
                    depth += 1
                    blank(index); blank(index + 1); index += 2
                } else if bytes[index] == Self.star, at(1) == Self.slash {
                    depth -= 1
                    blank(index); blank(index + 1); index += 2
                    if depth == 0 { return }
                } else {
                    blank(index); index += 1
                }
            }
        }

        /// `#` signs followed by a quote: a raw string.
        private func rawStringAhead() -> Bool {
            var offset = 0
            while at(offset) == Self.hash { offset += 1 }
            return at(offset) == Self.quote
        }

        /// A string literal from its opening delimiter; the delimiters stay, the contents are blanked
        /// except for interpolations, which are scanned as code.
        private mutating func string() {
            var hashes = 0
            while at(0) == Self.hash { hashes += 1; index += 1 }
            let multiline = at(0) == Self.quote && at(1) == Self.quote && at(2) == Self.quote
            index += multiline ? 3 : 1
            while index < bytes.count {
                let byte = bytes[index]
                if byte == Self.backslash, (0..<hashes).allSatisfy({ at(1 + $0) == Self.hash }) {
                    if at(1 + hashes) == UInt8(ascii: "(") {
                        index += 2 + hashes
                        code(untilCloseParen: true)
                        index += 1 // the interpolation's closing parenthesis
                    } else {
                        blank(index); index += 1
                        if index < bytes.count { blank(index); index += 1 } // the escaped character
                    }
                } else if byte == Self.quote, closes(multiline: multiline, hashes: hashes) {
                    index += (multiline ? 3 : 1) + hashes
                    return
                } else if byte == Self.newline, !multiline {
                    return // an unterminated literal: the line ends it
                } else {
                    blank(index); index += 1
                }
            }
        }

        private func closes(multiline: Bool, hashes: Int) -> Bool {
            let quotes = multiline ? 3 : 1
            return (0..<quotes).allSatisfy { at($0) == Self.quote } && (0..<hashes).allSatisfy { at(quotes + $0) == Self.hash }
        }
    }
}
