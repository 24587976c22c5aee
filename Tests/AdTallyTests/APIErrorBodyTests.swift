@testable import AdTally
import HTTP
import HTTPServer
import Testing

/// API.md's error body is AdTally's, handed to the server through the router.
@Suite(.timeLimit(.minutes(3))) struct APIErrorBodyTests {
    @Test func errorsAreWrittenAsAPIMdSays() {
        let r = ErrorResponse.make(status: .badRequest, code: "invalid_query", message: "bad \"from\"\n", field: "from", format: .api)
        #expect(r.headers["Content-Type"] == "application/json")
        #expect(r.errorCode == "invalid_query")
        guard case .bytes(let body) = r.body else {
            Issue.record("no plain body")
            return
        }
        #expect(String(decoding: body, as: UTF8.self) == #"{"error":{"code":"invalid_query","message":"bad \"from\"\n","field":"from"}}"#)
        let internalError = ErrorResponse.make(for: CancellationError(), format: .api)
        #expect(internalError.status.code == 500)
        if case .bytes(let b) = internalError.body {
            #expect(String(decoding: b, as: UTF8.self) == #"{"error":{"code":"internal","message":"internal error"}}"#)
        }
    }
}
