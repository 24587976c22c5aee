import Dispatch
import Glibc
import HTTP
import Timestamps

/// Everything about the server that an operator or a test may want to change: where it listens, the
/// limits of API.md section 5 and the timeouts. Defaults are API.md's.
public struct ServerConfiguration: Sendable {
    /// An IPv4 or IPv6 literal (`127.0.0.1`, `::1`, `0.0.0.0`, `::`), or `localhost`.
    public var host: String
    /// The TCP port; 0 lets the kernel choose (read it back from `HTTPServer.boundPort`).
    public var port: Int
    /// Head, target, header-count and body limits (431, 414, 431, 413).
    public var limits: ParserLimits
    /// From the first byte of a request until its head is complete: past it, `408` and close.
    public var headerReadTimeout: Duration
    /// From the end of the head until the body is complete: past it, `408` and close. Not in API.md,
    /// but without it a client could hold a connection (and a body buffer) forever.
    public var bodyReadTimeout: Duration
    /// A keep-alive connection with no byte of a next request is closed silently after this.
    public var idleTimeout: Duration
    /// A response that makes no write progress for this long is abandoned and the connection closed,
    /// so a client that stops reading cannot pin a handler thread blocked in a streamed body.
    public var writeTimeout: Duration
    /// After the server decides to close, it stops writing and discards input for at most this long
    /// (a "lingering close", RFC 9112 9.6) so the client reads the final response instead of a reset.
    public var lingerTimeout: Duration
    /// Open connections beyond this get `503` with `Retry-After: 1` and are closed.
    public var maxConnections: Int
    /// Serial IO queues driving the sockets (one per core by default).
    public var ioQueueCount: Int
    /// Threads that run handlers; handlers may block (libpq), so this bounds concurrent handlers.
    public var maxWorkerThreads: Int
    /// How much of a streamed body may wait unsent before the handler's `write` blocks.
    public var streamBufferBytes: Int
    /// `listen(2)` backlog.
    public var backlog: Int32
    /// Open connections of one TCP peer beyond this are over the cap: their first request is
    /// marked (`RequestContext.overConnectionCap`, for the product's refusal) and the connection
    /// closes after its first response. 0: no cap.
    public var maxConnectionsPerPeer = 0
    /// How long a connection over its peer's cap may wait before its request head is complete
    /// (idle, then reading the head): a peer reopening the connections the cap closes would
    /// otherwise hold this many more for as long as the idle and header timeouts allow.
    public var overCapTimeout: Duration = .seconds(1)
    /// Peers never counted against `maxConnectionsPerPeer` (trusted proxies: their connections
    /// carry many clients). Called once per accepted connection, on the accept queue.
    public var uncappedPeer: @Sendable (IPAddress) -> Bool = { _ in false }
    /// Request bodies held in memory by all connections together (from the head until the
    /// response is written) stay within this: a request whose body would pass it waits for its
    /// turn (its socket is not read), and after `bodyBudgetWait` is answered `503` and closed.
    public var maxBufferedBodyBytes = 256 * 1024 * 1024
    /// How long a request waits for its body's turn under `maxBufferedBodyBytes`.
    public var bodyBudgetWait: Duration = .seconds(5)
    /// Log lines (the access log, mostly) waiting for the logger at most: a logger that cannot
    /// write (standard output blocked) makes the server drop further lines and count them
    /// (`HTTPServer.droppedLogLines`) rather than hold them without bound.
    public var maxPendingLogLines = 50_000
    /// After `accept` fails for want of file descriptors (`EMFILE`, `ENFILE`), the listener is not
    /// watched for this long (open connections are served meanwhile; no busy loop).
    public var acceptPauseAfterDescriptorShortage: Duration = .milliseconds(100)

    /// A configuration with API.md's defaults; only host and port are commonly given.
    public init(host: String = "127.0.0.1", port: Int = 8080, limits: ParserLimits = ParserLimits(),
                headerReadTimeout: Duration = .seconds(10), bodyReadTimeout: Duration = .seconds(30),
                idleTimeout: Duration = .seconds(60), writeTimeout: Duration = .seconds(30),
                lingerTimeout: Duration = .seconds(2), maxConnections: Int = 10_000,
                ioQueueCount: Int = max(1, System.coreCount), maxWorkerThreads: Int = 64,
                streamBufferBytes: Int = 256 * 1024, backlog: Int32 = 1024) {
        self.host = host
        self.port = port
        self.limits = limits
        self.headerReadTimeout = headerReadTimeout
        self.bodyReadTimeout = bodyReadTimeout
        self.idleTimeout = idleTimeout
        self.writeTimeout = writeTimeout
        self.lingerTimeout = lingerTimeout
        self.maxConnections = maxConnections
        self.ioQueueCount = ioQueueCount
        self.maxWorkerThreads = maxWorkerThreads
        self.streamBufferBytes = streamBufferBytes
        self.backlog = backlog
    }

    /// How often each IO queue sweeps its connections for expired timers: a quarter of the shortest
    /// timeout, between 10 ms and 1 s. One timer per queue instead of one per connection.
    var sweepInterval: Duration {
        let shortest = [headerReadTimeout, bodyReadTimeout, idleTimeout, writeTimeout, lingerTimeout, overCapTimeout].min() ?? .seconds(1)
        return min(max(shortest / 4, .milliseconds(10)), .seconds(1))
    }
}

/// Facts about the machine, and the process's limits.
public enum System {
    /// Active processor count, the default number of IO queues.
    public static var coreCount: Int { Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// The open-file limit (`RLIMIT_NOFILE`) before and after `raiseOpenFileLimit`.
    public struct OpenFileLimit: Sendable, Equatable {
        /// The soft limit found at start.
        public var before: UInt64
        /// The soft limit now.
        public var soft: UInt64
        /// The hard limit (the most the soft one may be raised to without privileges).
        public var hard: UInt64
    }

    /// Raises the soft open-file limit to the hard one (a common soft limit of 1,024 is far below
    /// the connections a server holds). An unlimited hard limit is taken as the kernel's
    /// `fs.nr_open`. nil when the limit cannot be read; `soft == before` when it could not be raised.
    public static func raiseOpenFileLimit() -> OpenFileLimit? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let before = UInt64(limit.rlim_cur)
        var target = limit.rlim_max
        if target == rlim_t.max {  // RLIM_INFINITY
            target = rlim_t(kernelOpenFileMaximum() ?? before)
        }
        if target > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = target
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return OpenFileLimit(before: before, soft: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max))
    }

    /// `/proc/sys/fs/nr_open`: the most file descriptors a process may have.
    private static func kernelOpenFileMaximum() -> UInt64? {
        let fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return UInt64(String(decoding: bytes[0..<n].prefix { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self))
    }
}

/// Monotonic now in nanoseconds.
func monotonicNow() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
