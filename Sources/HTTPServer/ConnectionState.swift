import HTTP

/// Where a connection is in its request/response cycle, after swift-nio's
/// `HTTPServerPipelineHandler`: one request at a time, so pipelined requests are handled and answered
/// strictly in order (and a pipelined `PUT` then `GET` sees the `PUT`). Bytes of later requests wait in
/// the connection's buffer. Each case carries the timestamp its timeout counts from.
enum ConnectionState {
    /// Between requests, no byte of the next one yet: the idle timeout runs.
    case idle(since: UInt64)
    /// Some bytes of a head arrived: the header timeout runs from the first one.
    case readingHead(since: UInt64)
    /// The head was accepted and routed; the body is arriving.
    case readingBody(PendingBody)
    /// A handler is running or a response is being written.
    case responding(Exchange)
    /// The server decided to close: the write side is shut and input is discarded until the peer
    /// closes or the linger timeout passes.
    case lingering(since: UInt64)
    /// The fd is closed (or closing); nothing more happens.
    case closed

    /// A request whose body is being read.
    struct PendingBody {
        let head: HTTPRequestHead
        let exchange: Exchange
        let handler: HTTPHandler
        /// The route promised a quick, non-blocking handler: run it on the IO queue.
        let nonBlocking: Bool
        /// The route answers later (`HTTPDeferredHandler`); `handler` is then not used.
        let deferred: HTTPDeferredHandler?
        let parameters: [String: String]
        var decoder: ChunkedBodyDecoder?
        let since: UInt64
    }

    /// One request and its response, for framing decisions and the access log.
    struct Exchange {
        let method: String
        let path: String
        let route: String
        let requestID: String
        let version: HTTPVersion
        let startedAt: UInt64
        /// Whether the connection stays open after this response.
        var keepAlive: Bool
        var status = 0
        var bodyBytes = 0
        /// The response's error code, for the access log.
        var errorCode: String?
        /// Every byte of the response has been queued for writing.
        var complete = false
        /// The backpressure channel of a streamed body, while one is being sent.
        var stream: StreamedBodyChannel?
    }

    /// The exchange a response belongs to, when there is one.
    var exchange: Exchange? {
        if case .responding(let e) = self { return e }
        return nil
    }

    var isClosed: Bool {
        if case .closed = self { return true }
        return false
    }

    /// Marks the exchange's response as fully queued. Only meaningful while responding.
    mutating func markResponseComplete() {
        if case .responding(var e) = self {
            e.complete = true
            self = .responding(e)
        }
    }

    /// Updates the exchange while responding.
    mutating func updateExchange(_ change: (inout Exchange) -> Void) {
        if case .responding(var e) = self {
            change(&e)
            self = .responding(e)
        }
    }
}
