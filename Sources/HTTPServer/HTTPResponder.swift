import Dispatch
import HTTP
import Synchronization

/// How a deferred handler (`HTTPDeferredHandler`) answers: `respond` once, from any thread. Later
/// calls are ignored. A responder released without an answer answers `500 internal`: that is a
/// handler bug, and the client still gets an answer instead of waiting for the connection timeout.
public final class HTTPResponder: Sendable {
    private let deliver: @Sendable (HTTPResponse) -> Void
    private let unexpected: @Sendable (any Error) -> Void
    private let format: ErrorBody
    private let answered = Atomic<Bool>(false)

    /// A responder that hands the response to `deliver` (the server builds these; tests may too).
    /// `unexpected` hears of every error answered by `respond(to:)` that is not an
    /// `HTTPResponseError` (the server logs it, as it does for a handler that throws). Error answers
    /// are written in `format` (the router's `errorBody`).
    public init(format: ErrorBody = .plainText, unexpected: @escaping @Sendable (any Error) -> Void = { _ in },
                _ deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        self.deliver = deliver
        self.unexpected = unexpected
        self.format = format
    }

    /// Answers the request with `response`; only the first call counts.
    public func respond(_ response: HTTPResponse) {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
        deliver(response)
    }

    /// Answers with the error's response, as the server answers a handler that throws it:
    /// an `HTTPResponseError` as it says, anything else `500 internal`, its detail only reported.
    public func respond(to error: any Error) {
        let (response, isUnexpected) = format.answer(error)
        if isUnexpected { unexpected(error) }
        respond(response)
    }

    /// Answers with what `make` returns, or with the error it throws (`respond(to:)`).
    public func respond(_ make: () throws -> HTTPResponse) {
        do {
            respond(try make())
        } catch {
            respond(to: error)
        }
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            deliver(ErrorResponse.make(status: ServerRefusal.internal.status, code: ServerRefusal.internal.code, message: "internal error", format: format))
        }
    }
}
