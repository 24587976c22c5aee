import Foundation
import Testing

extension EndToEnd {
    /// The README's quick start, run as written against a real server: every answer it prints must
    /// be the answer the server gives, generated ids and times aside. It cannot go stale again.
    @Suite(.timeLimit(.minutes(5))) struct QuickStart {
        static let readme = Paths.repositoryRoot.appendingPathComponent("README.md")

        /// The shell block after `## Quick start`.
        static func block() throws -> String {
            let text = try String(contentsOf: readme, encoding: .utf8)
            let section = try #require(text.range(of: "## Quick start"), "README.md has no quick start")
            let rest = text[section.upperBound...]
            let open = try #require(rest.range(of: "```sh\n"))
            let close = try #require(rest[open.upperBound...].range(of: "\n```"))
            return String(rest[open.upperBound..<close.lowerBound])
        }

        /// The answers the block prints, in order: a comment line right after a command (or after
        /// another answer line) is an answer; one that starts with two spaces continues the answer
        /// before it. Comments after a blank line are the story, not answers.
        static func expectedAnswers(_ block: String) -> [String] {
            var answers: [String] = []
            var previousIsCode = false
            var previousIsAnswer = false
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix("#  "), previousIsAnswer, !answers.isEmpty {
                    answers[answers.count - 1] += line.dropFirst(3)
                } else if line.hasPrefix("# "), previousIsCode || previousIsAnswer {
                    answers.append(String(line.dropFirst(2)))
                    previousIsAnswer = true
                    previousIsCode = false
                    continue
                } else {
                    previousIsAnswer = false
                    previousIsCode = !line.isEmpty && !line.hasPrefix("#")
                    continue
                }
                previousIsAnswer = true
            }
            return answers
        }

        /// Generated ids and times replaced by `…`, as the README writes them (and a CSV line's
        /// carriage return, which a terminal does not show, left out).
        static func normalized(_ text: String) -> String {
            var text = text.hasSuffix("\r") ? String(text.dropLast()) : text
            for pattern in [#"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"#,
                            #"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9]{2}:[0-9]{2})"#] {
                text = text.replacingOccurrences(of: pattern, with: "…", options: .regularExpression)
            }
            return text
        }

        @Test func everyAnswerIsTheOneItPrints() throws {
            let block = try Self.block()
            let expected = Self.expectedAnswers(block)
            #expect(expected.count >= 10, "the quick start's answers were not found: \(expected)")
            let server = try ServerProcess.start(adminToken: "dev-admin-token")
            defer { server.kill() }
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("quickstart-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: work) }
            let script = block.replacingOccurrences(of: "BASE=http://127.0.0.1:8080", with: "BASE=http://127.0.0.1:\(server.port)")
            #expect(script != block, "the quick start no longer sets BASE=http://127.0.0.1:8080")

            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-e", "-c", script]
            process.currentDirectoryURL = work
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.standardError
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            // A CSV answer ends its lines with CRLF, which a terminal shows as line ends too.
            let text = String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n")
            let answers = text.split(separator: "\n").map { Self.normalized(String($0)) }
            #expect(answers.count == expected.count, "\(answers.count) answers, the README prints \(expected.count)")
            for (index, (answer, printed)) in zip(answers, expected).enumerated() {
                #expect(answer == printed, "answer \(index + 1): the server says\n\(answer)\nthe README prints\n\(printed)")
            }
        }
    }
}
