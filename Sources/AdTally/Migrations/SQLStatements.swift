/// Splits a migration's SQL text into its statements, so that the runner can send each on its own
/// (inside the migration's one transaction). Citus propagates some DDL on a distributed table to
/// its shards with the text the statement arrived in: a text of two statements then reaches the
/// workers as one prepared statement, and they refuse it ("cannot insert multiple commands into a
/// prepared statement"). Plain PostgreSQL gives the same result either way.
///
/// A `;` ends a statement unless it is inside a string constant (`'...'` with `''`, `E'...'` with
/// backslash escapes), a quoted identifier (`"..."`), a dollar-quoted string (`$$...$$`,
/// `$tag$...$tag$`), a `--` comment or a `/* */` comment (which nest, as in PostgreSQL). Begin/end
/// blocks of SQL-standard function bodies (`BEGIN ATOMIC ... END`) are not recognised: a migration
/// writes function bodies dollar-quoted. Statements are returned with their comments and without
/// the `;`; pieces that hold only whitespace and comments are dropped.
enum SQLStatements {
    static func split(_ sql: String) -> [String] {
        let b = Array(sql.utf8)
        let n = b.count
        var statements: [String] = []
        var start = 0
        var hasCode = false  // whether the current piece holds anything but whitespace and comments
        var i = 0

        func finish(_ end: Int) {
            if hasCode { statements.append(String(decoding: b[start..<end], as: UTF8.self)) }
            start = end + 1
            hasCode = false
        }

        while i < n {
            let c = b[i]
            switch c {
            case UInt8(ascii: "-") where i + 1 < n && b[i + 1] == UInt8(ascii: "-"):
                while i < n, b[i] != UInt8(ascii: "\n") { i += 1 }
            case UInt8(ascii: "/") where i + 1 < n && b[i + 1] == UInt8(ascii: "*"):
                var depth = 1
                i += 2
                while i < n, depth > 0 {
                    if b[i] == UInt8(ascii: "/"), i + 1 < n, b[i + 1] == UInt8(ascii: "*") {
                        depth += 1; i += 2
                    } else if b[i] == UInt8(ascii: "*"), i + 1 < n, b[i + 1] == UInt8(ascii: "/") {
                        depth -= 1; i += 2
                    } else {
                        i += 1
                    }
                }
            case UInt8(ascii: "'"):
                hasCode = true
                // E'...' (or e'...') allows backslash escapes; a letter or digit before the E makes
                // it part of an identifier, not a prefix.
                let escapes = i > 0 && (b[i - 1] | 0x20) == UInt8(ascii: "e") && !(i > 1 && isIdentifierByte(b[i - 2]))
                i += 1
                while i < n {
                    if escapes, b[i] == UInt8(ascii: "\\") { i += 2; continue }
                    if b[i] == UInt8(ascii: "'") {
                        if i + 1 < n, b[i + 1] == UInt8(ascii: "'") { i += 2; continue }
                        break
                    }
                    i += 1
                }
                i += 1
            case UInt8(ascii: "\""):
                hasCode = true
                i += 1
                while i < n {
                    if b[i] == UInt8(ascii: "\"") {
                        if i + 1 < n, b[i + 1] == UInt8(ascii: "\"") { i += 2; continue }
                        break
                    }
                    i += 1
                }
                i += 1
            case UInt8(ascii: "$") where !(i > 0 && isIdentifierByte(b[i - 1])):
                hasCode = true
                // $tag$ where tag is empty or an identifier not starting with a digit ($1 is a parameter).
                var j = i + 1
                while j < n, isIdentifierByte(b[j]), !(j == i + 1 && isDigit(b[j])) { j += 1 }
                guard j < n, b[j] == UInt8(ascii: "$") else { i += 1; continue }
                let tag = b[i...j]
                var k = j + 1
                var closed = false
                while k + tag.count <= n {
                    if b[k] == UInt8(ascii: "$"), b[k..<(k + tag.count)].elementsEqual(tag) {
                        closed = true
                        break
                    }
                    k += 1
                }
                i = closed ? k + tag.count : n
            case UInt8(ascii: ";"):
                finish(i)
                i += 1
            default:
                if !isWhitespace(c) { hasCode = true }
                i += 1
            }
        }
        if start < n { finish(n) }
        return statements
    }

    private static func isIdentifierByte(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || isDigit(c) || c == UInt8(ascii: "_") || c >= 0x80
    }

    private static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    private static func isWhitespace(_ c: UInt8) -> Bool {
        c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == 0x0C
    }
}
