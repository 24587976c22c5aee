import HTTP
import Synchronization

/// Collects a streamed body in memory, for HTTP/1.0 clients that cannot receive chunked bodies.
final class CollectingBodyWriter: HTTPBodyWriter, Sendable {
    private let collected = Mutex<[UInt8]>([])
    var bytes: [UInt8] { collected.withLock { $0 } }
    func write(_ bytes: [UInt8]) throws { collected.withLock { $0.append(contentsOf: bytes) } }
}
