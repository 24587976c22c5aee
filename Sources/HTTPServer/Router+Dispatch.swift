import Dispatch
import HTTP
import Synchronization

/// Where a route's answer was handed over, so that whoever sends it hops threads only when it must.
enum AnsweringThread: Sendable {
    /// The IO queue that called `run` (an inline handler).
    case caller
    /// A worker thread (`offload`): a streamed body may be produced right here.
    case worker
    /// Whichever thread a deferred handler answered on.
    case other
}

/// How a request reaches its handler, written once for the server's connections and for callers in
/// the same process (`respond(to:)`, which tests use): route the head and check it before the body
/// is read, then run the endpoint its way.
extension Router {
    /// A request whose head its endpoint accepted: the route and the handler that answers it.
    struct Accepted: Sendable {
        let pattern: String
        let parameters: [String: String]
        let handler: RouteHandler
    }

    /// What routing a head decided.
    enum Routing {
        /// The handler that takes the request, once its body is read.
        case accepted(Accepted)
        /// The answer that refuses it, before any body is read: `404`, `405`, or the error its
        /// endpoint threw. `pattern` is the matched route, if any (the metrics label); `unexpected`
        /// is the error when it is not one the product answers on purpose (the server logs it).
        case refused(pattern: String?, response: HTTPResponse, unexpected: (any Error)?)
    }

    /// Routes `head` (from `peer`) and lets its endpoint accept or refuse it.
    func route(_ head: HTTPRequestHead, requestID: String, peer: IPAddress? = nil, overConnectionCap: Bool = false) -> Routing {
        switch match(head.method, head.pathSegments) {
        case .notFound:
            return .refused(pattern: nil, response: ErrorResponse.make(status: ServerRefusal.notFound.status, code: ServerRefusal.notFound.code, message: "no such resource",
                                                                       format: errorBody), unexpected: nil)
        case .methodNotAllowed(let pattern, let allowed):
            return .refused(pattern: pattern, response: ErrorResponse.make(
                status: ServerRefusal.methodNotAllowed.status, code: ServerRefusal.methodNotAllowed.code, message: "method \(head.method.rawValue) not allowed here",
                headers: [("Allow", allowed.joined(separator: ", "))], format: errorBody), unexpected: nil)
        case .found(let route):
            let context = RequestContext(request: HTTPRequest(head: head, body: []), route: route.pattern, parameters: route.parameters,
                                         requestID: requestID, peer: peer, overConnectionCap: overConnectionCap)
            do {
                return .accepted(Accepted(pattern: route.pattern, parameters: route.parameters, handler: try route.accept(context)))
            } catch {
                let (response, unexpected) = errorBody.answer(error)
                return .refused(pattern: route.pattern, response: response, unexpected: unexpected ? error : nil)
            }
        }
    }

    /// Runs `route`'s handler for the complete request in `context`: an inline one on this thread, a
    /// blocking one through `offload` (a worker thread), a deferred one here for a small body and
    /// through `offload` for a large one. `answer` gets the response exactly once. `unexpected`
    /// hears of every error answered that is not an `HTTPResponseError` (the server logs it).
    func run(_ route: Accepted, _ context: RequestContext, offload: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
             unexpected: @escaping @Sendable (any Error) -> Void, answer: @escaping @Sendable (HTTPResponse, AnsweringThread) -> Void) {
        let format = errorBody
        @Sendable func response(_ handler: HTTPHandler) -> HTTPResponse {
            do {
                return try handler(context)
            } catch {
                let (response, isUnexpected) = format.answer(error)
                if isUnexpected { unexpected(error) }
                return response
            }
        }
        switch route.handler {
        case .inline(let handler):
            answer(response(handler), .caller)
        case .onWorker(let handler):
            offload { answer(response(handler), .worker) }
        case .deferred(let handler):
            let responder = HTTPResponder(format: format, unexpected: unexpected) { answer($0, .other) }
            let start: @Sendable () -> Void = {
                do {
                    try handler(context, responder)
                } catch {
                    responder.respond(to: error)
                }
            }
            if context.request.body.count <= Self.inlineDeferredBodyLimit {
                start()
            } else {
                offload(start)
            }
        }
    }

    /// What the server would answer `request` in this process, without a socket: the head is
    /// routed and checked, the handler runs its way, and a streamed body is collected (each write
    /// one element of `chunks`). For tests and tools; the connection's own framing (`Connection`,
    /// `Date`, `HEAD` without a body) is the server's, not this.
    public func respond(to request: HTTPRequest, requestID: String = "in-process", peer: IPAddress? = nil) async -> InProcessAnswer {
        let route: Accepted
        switch self.route(request.head, requestID: requestID, peer: peer) {
        case .refused(_, let response, _):
            return InProcessAnswer(response: response)
        case .accepted(let accepted):
            route = accepted
        }
        let context = RequestContext(request: request, route: route.pattern, parameters: route.parameters, requestID: requestID, peer: peer)
        return await withCheckedContinuation { continuation in
            // Handlers may block (libpq): they run on Dispatch's threads, never on the caller's.
            DispatchQueue.global().async {
                run(route, context, offload: { DispatchQueue.global().async(execute: $0) }, unexpected: { _ in }) { response, _ in
                    guard case .stream(let produce) = response.body else {
                        continuation.resume(returning: InProcessAnswer(response: response))
                        return
                    }
                    DispatchQueue.global().async {
                        let collector = ChunkCollector()
                        var collected = response
                        var failure: (any Error)?
                        do {
                            try produce(collector)
                        } catch {
                            failure = error
                        }
                        collected.body = .bytes(collector.bytes)
                        continuation.resume(returning: InProcessAnswer(response: collected, chunks: collector.chunks, streamError: failure))
                    }
                }
            }
        }
    }
}

/// What `Router.respond(to:)` answered.
public struct InProcessAnswer: Sendable {
    /// The response; a streamed body is collected into `.bytes`.
    public var response: HTTPResponse
    /// Each write of a streamed body; nil for a body with `Content-Length`.
    public var chunks: [[UInt8]]?
    /// The error that cut a streamed body short (the server would end it without its last chunk).
    public var streamError: (any Error)?

    init(response: HTTPResponse, chunks: [[UInt8]]? = nil, streamError: (any Error)? = nil) {
        self.response = response
        self.chunks = chunks
        self.streamError = streamError
    }
}

/// The writer `Router.respond(to:)` gives a streamed body: it keeps every write, each a chunk as
/// the server would send it (an empty write sends nothing, as `ConnectionBodyWriter`'s).
private final class ChunkCollector: HTTPBodyWriter, Sendable {
    private let collected = Mutex<[[UInt8]]>([])
    var chunks: [[UInt8]] { collected.withLock { $0 } }
    var bytes: [UInt8] { chunks.flatMap { $0 } }
    func write(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        collected.withLock { $0.append(bytes) }
    }
}
