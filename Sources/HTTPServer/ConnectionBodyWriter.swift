import HTTP

/// The writer a streaming handler gets: frames each write as a chunk, waits for room in the
/// connection's send buffer (backpressure), and throws `ClientGone` once the connection closed.
struct ConnectionBodyWriter: HTTPBodyWriter {
    let connection: Connection
    let channel: StreamedBodyChannel

    func write(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        let framed = HTTPResponseSerializer.chunk(bytes)
        try channel.acquire(framed.count)
        let connection = self.connection
        let count = bytes.count
        connection.queueAsync { connection.streamChunk(framed, bodyBytes: count) }
    }
}
