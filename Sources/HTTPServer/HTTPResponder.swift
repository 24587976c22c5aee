import Dispatch
import HTTP
import Synchronization

/// How a deferred handler (`HTTPDeferredHandler`) answers: `respond` once, from any thread. Later
/// calls are ignored. A responder released without an answer answers `500 internal`: that is a
/// handler bug, and the client still gets an answer instead of waiting for the connection timeout.
public final class HTTPResponder: Sendable {
    private let deliver: @Sendable (HTTPResponse) -> Void
    private let answered = Atomic<Bool>(false)

    /// A responder that hands the response to `deliver` (the server builds these; tests may too).
    public init(_ deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        self.deliver = deliver
    }

    /// Answers the request with `response`; only the first call counts.
    public func respond(_ response: HTTPResponse) {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
        deliver(response)
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            deliver(ErrorResponse.make(status: .internalServerError, code: "internal", message: "internal error"))
        }
    }
}

/// The answer of a deferred handler run by a caller that waits for it (`Router.addDeferred`).
final class WaitedAnswer: Sendable {
    private let response = Mutex<HTTPResponse?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func set(_ r: HTTPResponse) {
        response.withLock { $0 = r }
        ready.signal()
    }

    func wait() -> HTTPResponse {
        ready.wait()
        // `set` stored a response before signalling; the fallback cannot be reached.
        return response.withLock { $0 } ?? ErrorResponse.make(status: .internalServerError, code: "internal", message: "internal error")
    }
}
