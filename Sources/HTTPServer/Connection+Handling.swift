import Dispatch
import Glibc
import HTTP
import Runtime

extension Connection {
    // MARK: - The body budget

    /// How much of the body budget a chunked body takes at a time.
    static let chunkedBudgetStep = 128 * 1024

    /// Takes `bytes` more of the server's body budget for the request under way. False when they
    /// must wait for their turn: reading stops until `bodyBudgetGranted`, or the sweep gives up.
    func reserveBody(_ bytes: Int) -> Bool {
        guard bytes > 0 else { return true }
        let loop = self.loop
        switch core.bodyBudget.reserve(bytes, granted: { [self] in loop.queue.async { self.bodyBudgetGranted() } }) {
        case .reserved:
            bodyReserved += bytes
            return true
        case .waiting(let ticket):
            budgetWait = (ticket, bytes)
            state.waitForBodyBudget(now: monotonicNow())
            pauseReading()
            return false
        }
    }

    /// On `loop.queue`: the budget made room for the waiting reservation.
    func bodyBudgetGranted() {
        guard let (ticket, bytes) = budgetWait, core.bodyBudget.take(ticket) else { return }
        budgetWait = nil
        bodyReserved += bytes
        guard case .readingBody(let pending) = state.phase else {
            releaseBodyBudget()
            return
        }
        state.bodyBudgetGranted(now: monotonicNow())
        if pending.head.expectsContinue, buffer.isEmpty { enqueue(HTTPResponseSerializer.continueResponse) }
        resumeReading()
        process()
    }

    /// Gives back what this connection holds of the body budget, and gives up a waiting reservation.
    func releaseBodyBudget() {
        if let (ticket, bytes) = budgetWait {
            budgetWait = nil
            if core.bodyBudget.cancel(ticket) { bodyReserved += bytes }
        }
        let held = bodyReserved
        bodyReserved = 0
        core.bodyBudget.release(held)
    }

    /// Answers a refusal that ends the connection (`400`, `408`, `413`, `414`, `431`, `505`, and
    /// `503` for a body that waited too long for room).
    func refuse(status: HTTPStatus, code: String, message: String, exchange: ConnectionState.Exchange?,
                        headers: [(String, String)] = []) {
        state.refuseAndClose(exchange ?? ConnectionState.Exchange(method: nil, path: "-", route: "unmatched", requestID: RequestID.generate(),
                                                                  version: .http1_1, startedAt: monotonicNow(), keepAlive: false))
        sendFull(ErrorResponse.make(status: status, code: code, message: message, headers: headers, format: core.router.errorBody))
    }

    // MARK: - Handling

    /// Runs the request's handler its way (`Router.run`, shared with in-process callers) and sends
    /// its answer from wherever it comes.
    func dispatch(_ request: HTTPRequest, _ pending: ConnectionState.PendingBody) {
        let logged = state.handle(pending, keepAlive: request.keepAlive)
        let context = RequestContext(request: request, route: logged.route, parameters: pending.route.parameters, requestID: logged.requestID,
                                     peer: peer, overConnectionCap: state.overConnectionCap)
        let workers = core.workers
        core.router.run(pending.route, context, offload: { workers.submit($0) },
                        unexpected: { [self] error in logUnexpected(error, logged) }) { [self] response, thread in
            deliver(response, for: request, logged, from: thread)
        }
    }

    /// Sends a handler's answer: a full body on the IO queue (at once when it is already there), a
    /// streamed one from a worker thread, where its producer may block.
    func deliver(_ response: HTTPResponse, for request: HTTPRequest, _ logged: ConnectionState.Exchange, from thread: AnsweringThread) {
        switch (response.body, thread) {
        case (.bytes, .caller):
            sendFull(response)
        case (.bytes, _):
            loop.queue.async { self.sendFull(response) }
        case (.stream(let produce), .worker):
            stream(response, produce, for: request, logged)
        case (.stream(let produce), _):
            core.workers.submit { [self] in stream(response, produce, for: request, logged) }
        }
    }

    /// Produces and sends a streamed body; runs on a worker thread. HTTP/1.1 frames it as chunks;
    /// HTTP/1.0, which has no chunked coding, gets the bytes as they come and the body ends with
    /// the connection (`Connection: close`, no `Content-Length`), so memory holds what the client
    /// has not taken yet, never the whole body.
    func stream(_ response: HTTPResponse, _ produce: @Sendable (any HTTPBodyWriter) throws -> Void, for request: HTTPRequest,
                        _ logged: ConnectionState.Exchange) {
        let closeDelimited = request.version == .http1_0
        if request.method == .head {
            // The head a GET would get, without producing the body.
            loop.queue.async { self.beginStream(response, nil, closeDelimited: closeDelimited) }
            return
        }
        let channel = StreamedBodyChannel(limit: core.configuration.streamBufferBytes)
        loop.queue.async { self.beginStream(response, channel, closeDelimited: closeDelimited) }
        let writer = ConnectionBodyWriter(connection: self, channel: channel, chunked: !closeDelimited)
        do {
            try produce(writer)
            loop.queue.async { self.endStream(succeeded: true, closeDelimited: closeDelimited) }
        } catch {
            if !(error is ClientGone) && !(error is HTTPBodyWriterDeadline) && core.router.errorBody.answer(error).unexpected {
                logUnexpected(error, logged)
            }
            loop.queue.async { self.endStream(succeeded: false, closeDelimited: closeDelimited) }
        }
    }

    /// Logs an error no answer was meant for (the answer was `500`).
    func logUnexpected(_ error: any Error, _ exchange: ConnectionState.Exchange) {
        core.log(.error, "handler failed", [("request_id", .string(exchange.requestID)), ("route", .string(exchange.route)),
                                            ("error", .string(String(describing: error)))])
    }
}
