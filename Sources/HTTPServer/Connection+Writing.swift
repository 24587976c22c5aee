import Dispatch
import Glibc
import HTTP
import Runtime

extension Connection {
    // MARK: - Writing

    func sendFull(_ response: HTTPResponse) {
        guard case .responding = state.phase else { return }
        guard case .bytes(let body) = response.body else { return }
        let connection = state.responseHead(status: response.status, shuttingDown: core.isShuttingDown)
        state.updateExchange { exchange in
            exchange.status = response.status.code
            exchange.errorCode = response.errorCode
            exchange.observation = response.observation
            exchange.bodyBytes = exchange.isHead ? 0 : body.count
            exchange.complete = true
        }
        guard let exchange = state.exchange else { return }
        var headers = response.headers
        headers.replaceOrAdd(name: "X-Request-Id", value: exchange.requestID)
        if exchange.isHead {
            // RFC 9110, 9.1: the GET answer's status and headers, Content-Length included, no body.
            enqueue(HTTPResponseSerializer.head(status: response.status, headers: headers, framing: .contentLength(body.count),
                                                date: HTTPDate.now(), connection: connection))
        } else {
            enqueue(HTTPResponseSerializer.response(status: response.status, headers: headers, body: body,
                                                    date: HTTPDate.now(), connection: connection))
        }
    }

    /// Sends the head of a streamed response; its chunks follow through `channel`. Without a
    /// channel (a `HEAD` request) the head is the whole response. A close-delimited body closes
    /// the connection after it.
    func beginStream(_ response: HTTPResponse, _ channel: StreamedBodyChannel?, closeDelimited: Bool) {
        guard case .responding = state.phase else {
            channel?.fail()
            return
        }
        if closeDelimited { state.updateExchange { $0.keepAlive = false } }
        let connection = state.responseHead(status: response.status, shuttingDown: core.isShuttingDown)
        state.updateExchange { exchange in
            exchange.status = response.status.code
            exchange.errorCode = response.errorCode
            exchange.observation = response.observation
            exchange.stream = channel
            if channel == nil { exchange.complete = true }
        }
        var headers = response.headers
        headers.replaceOrAdd(name: "X-Request-Id", value: state.exchange?.requestID ?? RequestID.generate())
        enqueue(HTTPResponseSerializer.head(status: response.status, headers: headers, framing: closeDelimited ? .closeDelimited : .chunked,
                                            date: HTTPDate.now(), connection: connection))
    }

    /// A chunk from the producer thread (already accounted in the channel).
    func streamChunk(_ bytes: [UInt8], bodyBytes: Int) {
        guard case .responding = state.phase else { return }
        state.updateExchange { $0.bodyBytes += bodyBytes }
        enqueue(bytes)
    }

    func endStream(succeeded: Bool, closeDelimited: Bool) {
        guard case .responding = state.phase else { return }
        guard succeeded else {
            // The status line is gone already: all we can do is cut the body short.
            close()
            return
        }
        state.updateExchange { $0.complete = true }
        if closeDelimited {
            // The body ends with the connection, once the rest is sent.
            flush()
        } else {
            enqueue(HTTPResponseSerializer.lastChunk)
        }
    }

    func enqueue(_ bytes: [UInt8]) {
        guard !state.isClosed else { return }
        if outboundOffset == outbound.count {
            outbound = bytes
            outboundOffset = 0
        } else {
            outbound.append(contentsOf: bytes)
        }
        flush()
    }

    /// Writes what the kernel takes; asks the epoll set for writability only on `EAGAIN`.
    func flush() {
        while outboundOffset < outbound.count {
            let written = outbound.withUnsafeBytes { raw -> Int in
                // Non-nil: the array is not empty, since outboundOffset < count.
                guard let base = raw.baseAddress else { return 0 }
                return send(fd, base + outboundOffset, raw.count - outboundOffset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                outboundOffset += written
                lastWriteProgress = monotonicNow()
                state.exchange?.stream?.release(written)
            } else {
                let e = errno
                if written < 0, e == EINTR { continue }
                if written < 0, e == EAGAIN || e == EWOULDBLOCK {
                    setInterest(write: true)
                    return
                }
                close()
                return
            }
        }
        outbound = []
        outboundOffset = 0
        if interest.write { setInterest(write: false) }
        if case .responding(let exchange) = state.phase, exchange.complete { finishResponse(exchange) }
    }

    /// The last byte of a response went to the kernel: record it, then close or wait for the next
    /// request (which may already be buffered).
    func finishResponse(_ exchange: ConnectionState.Exchange) {
        let observer = core.observer
        let logging = core.logger.isEnabled(.info)
        if observer != nil || logging {
            let record = ResponseRecord(method: exchange.method, path: exchange.path, route: exchange.route, status: exchange.status,
                                        durationSeconds: Double(monotonicNow() - exchange.startedAt) / 1e9,
                                        bytes: exchange.bodyBytes, requestID: exchange.requestID, errorCode: exchange.errorCode,
                                        observation: exchange.observation)
            observer?.didRespond(record)
            if logging { core.logAccess(record) }
        }
        // The request's body is no longer held (the handler answered): its room goes to the next.
        if bodyReserved > 0 || budgetWait != nil { releaseBodyBudget() }
        switch state.responseSent(now: monotonicNow(), shuttingDown: core.isShuttingDown, bufferEmpty: buffer.isEmpty) {
        case .close:
            close()
        case .linger:
            shutdown(fd, Int32(SHUT_WR))
            buffer = []
            resumeReading()
        case .nextRequest:
            resumeReading()
            process()
        }
    }
}
