import HTTP

/// The writer a streaming handler gets: frames each write as a chunk (or, for an HTTP/1.0 client,
/// sends it as it is: the body ends with the connection), waits for room in the connection's send
/// buffer (backpressure), and throws `ClientGone` once the connection closed.
struct ConnectionBodyWriter: HTTPBodyWriter {
    let connection: Connection
    let channel: StreamedBodyChannel
    /// Whether each write is framed as a chunk (false: a close-delimited body).
    var chunked = true

    func write(_ bytes: [UInt8]) throws {
        try send(bytes, until: nil)
    }

    func write(_ bytes: [UInt8], before deadline: ContinuousClock.Instant) throws {
        try send(bytes, until: deadline)
    }

    private func send(_ bytes: [UInt8], until deadline: ContinuousClock.Instant?) throws {
        guard !bytes.isEmpty else { return }
        let framed = chunked ? HTTPResponseSerializer.chunk(bytes) : bytes
        try channel.acquire(framed.count, until: deadline)
        let connection = self.connection
        let count = bytes.count
        connection.queueAsync { connection.streamChunk(framed, bodyBytes: count) }
    }
}
