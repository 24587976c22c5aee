/// The bot-agent list (`ADTALLY_BOT_AGENTS_FILE`): does a `User-Agent` contain one of the patterns,
/// ASCII letters compared in any case? Answered in one pass over the agent's bytes, whatever the
/// number of patterns: the patterns are compiled into an Aho-Corasick automaton whose every state
/// has its transitions for every byte class filled in (a deterministic automaton), so matching is
/// one table lookup per byte of the agent. A list of 1,000 patterns costs the same per request as
/// a list of one.
public struct AgentPatterns: Sendable, Equatable {
    /// Bytes that appear in no pattern share class 0; the others have a class each (letters
    /// folded to lowercase first).
    private let classOfByte: [UInt8]
    private let classCount: Int
    /// `next[state * classCount + class]`: the state after reading a byte of that class.
    private let next: [Int32]
    /// Whether reaching a state means some pattern ends here.
    private let accepting: [Bool]
    /// How many patterns it was built from.
    public let patternCount: Int

    /// The empty list: matches nothing.
    public init() {
        self.init(patterns: [])
    }

    /// The automaton of `patterns` (empty patterns are ignored).
    init(patterns: [String]) {
        let folded = patterns.map { Array($0.utf8).map(Self.fold) }.filter { !$0.isEmpty }
        patternCount = folded.count
        var classes = [UInt8](repeating: 0, count: 256)
        var count = 1
        for pattern in folded {
            // Patterns are folded to lowercase, so at most 230 distinct bytes occur: every class
            // fits a byte, and class 0 stays for the bytes no pattern has.
            for byte in pattern where classes[Int(byte)] == 0 {
                classes[Int(byte)] = UInt8(truncatingIfNeeded: count)
                count += 1
            }
        }
        // A byte that is an uppercase letter reads as its lowercase.
        for upper in UInt8(ascii: "A")...UInt8(ascii: "Z") { classes[Int(upper)] = classes[Int(upper | 0x20)] }
        classOfByte = classes
        classCount = count

        // The trie, then the failure links breadth first, filling each state's missing transitions
        // from its failure state's (which is complete, being shallower).
        var goto: [[Int32]] = [[Int32](repeating: -1, count: count)]
        var accepting = [false]
        for pattern in folded {
            var state = 0
            for byte in pattern {
                let c = Int(classes[Int(byte)])
                if goto[state][c] < 0 {
                    goto[state][c] = Int32(goto.count)
                    goto.append([Int32](repeating: -1, count: count))
                    accepting.append(false)
                }
                state = Int(goto[state][c])
            }
            accepting[state] = true
        }
        var failure = [Int](repeating: 0, count: goto.count)
        var queue: [Int] = []
        for c in 0..<count {
            if goto[0][c] < 0 {
                goto[0][c] = 0
            } else {
                let child = Int(goto[0][c])
                failure[child] = 0
                queue.append(child)
            }
        }
        var head = 0
        while head < queue.count {
            let state = queue[head]
            head += 1
            accepting[state] = accepting[state] || accepting[failure[state]]
            for c in 0..<count {
                let child = goto[state][c]
                if child < 0 {
                    goto[state][c] = goto[failure[state]][c]
                } else {
                    failure[Int(child)] = Int(goto[failure[state]][c])
                    queue.append(Int(child))
                }
            }
        }
        next = goto.flatMap { $0 }
        self.accepting = accepting
    }

    private static func fold(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    public var isEmpty: Bool { patternCount == 0 }

    /// Whether `agent` contains a pattern.
    public func matches(_ agent: String) -> Bool {
        guard patternCount > 0 else { return false }
        var agent = agent
        return agent.withUTF8 { bytes in
            var state = 0
            for byte in bytes {
                state = Int(next[state &* classCount &+ Int(classOfByte[Int(byte)])])
                if accepting[state] { return true }
            }
            return false
        }
    }

    /// The list of a file's lines: one pattern a line, surrounding spaces trimmed; blank lines and
    /// lines starting with `#` ignored. A line with a control character (a tab aside) is refused:
    /// no `User-Agent` can contain one, so it is a mistake (a binary file, say). Throws its number.
    static func parse(lines text: String) throws(BadLine) -> AgentPatterns {
        var patterns: [String] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard !trimmed.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                throw BadLine(line: number + 1, text: String(line.prefix(80)))
            }
            patterns.append(trimmed)
        }
        return AgentPatterns(patterns: patterns)
    }

    /// A line that is not a pattern.
    struct BadLine: Error {
        let line: Int
        let text: String
    }
}
