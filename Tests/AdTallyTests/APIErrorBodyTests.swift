@testable import AdTally
import HTTP
import HTTPServer
import Postgres
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

    @Test func anErrorWithoutAFieldLeavesItOut() {
        let r = ErrorResponse.make(APIError(.malformedJSON, "The body is empty."), format: .api)
        #expect(r.status.code == 400)
        guard case .bytes(let body) = r.body else {
            Issue.record("no plain body")
            return
        }
        #expect(String(decoding: body, as: UTF8.self) == #"{"error":{"code":"malformed_json","message":"The body is empty."}}"#)
    }

    /// A database that cannot be used is `503 unavailable` with `Retry-After`, from wherever a
    /// handler met it; a statement that failed for another reason is a `500`.
    @Test func aDatabaseThatCannotBeUsedIsUnavailable() {
        let gone = ErrorBody.api.answer(PostgresError(kind: .connectionLost, message: "server closed the connection"))
        #expect(gone.response.status.code == 503 && !gone.unexpected)
        #expect(gone.response.headers["Retry-After"] == "1")
        #expect(gone.response.errorCode == "unavailable")
        let failed = ErrorBody.api.answer(PostgresError(kind: .statementFailed, message: "syntax error"))
        #expect(failed.response.status.code == 500 && failed.unexpected)
    }
}
