import Contract
import Foundation
import HTTPServer
import Testing

/// docs/openapi.yaml names exactly the error codes the service answers, each with its status, and
/// no status the service never answers: the codes are `ErrorCode`'s (the product's) and
/// `ServerRefusal.everyCode` (the HTTP server's and its parser's own refusals, which must be among
/// the product's, with the same status).
@Suite(.timeLimit(.minutes(3))) struct OpenAPIErrorCodeTests {
    /// The successes the slices answer: `200`, `201` (a feed or an adjustment made) and the
    /// dashboard files' `304 Not Modified`.
    static let successes: Set<Int> = [200, 201, 304]

    static func spec() throws -> String {
        try String(contentsOf: OpenAPIRouteTests.root.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
    }

    /// The `ErrorCode` schema's `enum` entries and its `x-status` map, in the order written.
    static func documentedCodes(_ text: String) -> (codes: [String], statuses: [String: Int]) {
        var codes: [String] = []
        var statuses: [String: Int] = [:]
        var section = ""
        var inSchema = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "    ErrorCode:" { inSchema = true; continue }
            guard inSchema else { continue }
            if line.hasPrefix("    "), !line.hasPrefix("     "), !line.trimmingCharacters(in: .whitespaces).isEmpty { break }
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("      "), !line.hasPrefix("       ") { section = trimmed; continue }
            if section == "enum:", trimmed.hasPrefix("- ") { codes.append(String(trimmed.dropFirst(2))) }
            if section == "x-status:", !trimmed.hasPrefix("#"), let colon = trimmed.firstIndex(of: ":"),
               let status = Int(trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)) {
                statuses[String(trimmed[..<colon])] = status
            }
        }
        return (codes, statuses)
    }

    /// Every status a response of the spec is keyed by (`"200":`).
    static func documentedStatuses(_ text: String) -> Set<Int> {
        var statuses: Set<Int> = []
        for line in text.split(separator: "\n") {
            let key = line.trimmingCharacters(in: .whitespaces)
            guard key.count == 6, key.hasPrefix("\""), key.hasSuffix("\":"), let status = Int(key.dropFirst().prefix(3)) else { continue }
            statuses.insert(status)
        }
        return statuses
    }

    @Test func theSpecNamesEveryCodeTheServiceAnswersAndNoOther() throws {
        let (codes, statuses) = Self.documentedCodes(try Self.spec())
        let service = Set(ErrorCode.allCases.map(\.rawValue))
        #expect(codes.count == Set(codes).count, "a code is listed twice: \(codes)")
        #expect(service.subtracting(codes).isEmpty, "answered but not in docs/openapi.yaml: \(service.subtracting(codes).sorted())")
        #expect(Set(codes).subtracting(service).isEmpty, "in docs/openapi.yaml but never answered: \(Set(codes).subtracting(service).sorted())")
        for code in ErrorCode.allCases {
            #expect(statuses[code.rawValue] == code.status, "docs/openapi.yaml's x-status of \(code.rawValue)")
        }
        #expect(Set(statuses.keys) == service, "x-status lists other codes than the service's")
    }

    @Test func theServersOwnRefusalsAreCodesOfTheContract() {
        for (code, status) in ServerRefusal.everyCode {
            #expect(ErrorCode(rawValue: code)?.status == status, "the server answers \(code) with \(status), which ErrorCode does not say")
        }
    }

    @Test func theSpecAnswersNoStatusTheServiceDoesNot() throws {
        let answered = Self.successes.union(ErrorCode.allCases.map(\.status))
        let documented = Self.documentedStatuses(try Self.spec())
        #expect(documented.subtracting(answered).isEmpty, "statuses in docs/openapi.yaml the service never answers: \(documented.subtracting(answered).sorted())")
        #expect(Self.successes.isSubset(of: documented), "successes the spec does not document: \(Self.successes.subtracting(documented).sorted())")
    }

    @Test func theReadersFindWhatIsWritten() {
        let text = """
            components:
              schemas:
                ErrorCode:
                  type: string
                  enum:
                    - a_code
                    - b_code
                  x-status:
                    # comment
                    a_code: 400
                    b_code: 409
                Error:
                  type: object
            paths:
              /x:
                get:
                  responses:
                    "200":
                    "409":
            """
        let (codes, statuses) = Self.documentedCodes(text)
        #expect(codes == ["a_code", "b_code"])
        #expect(statuses == ["a_code": 400, "b_code": 409])
        #expect(Self.documentedStatuses(text) == [200, 409])
    }
}
