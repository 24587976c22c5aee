import Foundation

/// Every setting of a tracker, with the defaults an app should start from. See docs/CLIENT.md for
/// what each one trades.
public struct TrackerConfiguration: Sendable {
    /// AdTally's root URL (`https://tally.example.com`); events go to `/v1/events` below it.
    public var endpoint: URL
    /// Where the queue lives: a journal directory, or memory.
    public var storage: TrackerStorage
    /// The longest an event waits before the tracker writes and `fsync`s it to the journal (default
    /// 1 s): the window in which the app's death loses it. Writes are grouped within it, so a burst
    /// costs one `fsync`. Zero writes at once.
    public var journalInterval: Duration = .seconds(1)
    /// A batch is sent when this many events wait (default 50, at most the server's 500).
    public var maxBatch: Int = 50
    /// The largest body of a batch in bytes (default and most: the server's 1 MiB).
    public var maxBatchBytes: Int = 1 << 20
    /// A batch is sent when its oldest event has waited this long, however few wait (default 10 s).
    public var maxDelay: Duration = .seconds(10)
    /// The most events the queue holds (default 10,000); beyond, the oldest are dropped and reported.
    public var capacity: Int = 10_000
    /// The first retry waits about this long (default 0.5 s), each next one twice as long...
    public var backoffBase: Duration = .milliseconds(500)
    /// ...up to this (default 60 s).
    public var backoffCap: Duration = .seconds(60)
    /// How long one request may take before it counts as failed (default 30 s).
    public var requestTimeout: Duration = .seconds(30)
    /// Whether `occurred_at` is corrected by the server's clock, as estimated from its `Date`
    /// headers (default true). Turn it off only if the device's clock is known to be right.
    public var correctsClock: Bool = true
    /// The clocks (default: the system's).
    public var clock: any TrackerClock = SystemClock()
    /// How requests are sent; nil (the default) picks `URLSessionTransport`, or on Linux for an
    /// `http://` endpoint `PlainHTTPTransport`.
    public var transport: (any EventTransport)?
    /// Called with every report, one at a time and in order, on the tracker's own queue; nil (the
    /// default) for none.
    public var observer: (@Sendable (TrackerReport) -> Void)?
    /// The source of backoff jitter: a number in 0...1 (default: random). Tests fix it.
    public var jitter: @Sendable () -> Double = { Double.random(in: 0...1) }

    /// The defaults, for `endpoint` and `storage`.
    public init(endpoint: URL, storage: TrackerStorage) {
        self.endpoint = endpoint
        self.storage = storage
    }

    /// Checks every range; the message names the setting.
    func validated() throws(TrackerError) -> TrackerConfiguration {
        guard let scheme = endpoint.scheme?.lowercased(), scheme == "https" || scheme == "http", endpoint.host != nil else {
            throw .invalidConfiguration("endpoint must be an http or https URL with a host, not \(endpoint)")
        }
        guard (1...500).contains(maxBatch) else { throw .invalidConfiguration("maxBatch must be 1...500, not \(maxBatch)") }
        guard (1024...(1 << 20)).contains(maxBatchBytes) else {
            throw .invalidConfiguration("maxBatchBytes must be 1024...1048576, not \(maxBatchBytes)")
        }
        guard capacity >= maxBatch, capacity <= 10_000_000 else {
            throw .invalidConfiguration("capacity must be maxBatch...10000000, not \(capacity)")
        }
        guard journalInterval >= .zero, journalInterval <= .seconds(60) else {
            throw .invalidConfiguration("journalInterval must be 0...60 s")
        }
        guard maxDelay >= .zero, maxDelay <= .seconds(3600) else { throw .invalidConfiguration("maxDelay must be 0...3600 s") }
        guard backoffBase > .zero, backoffCap >= backoffBase else {
            throw .invalidConfiguration("backoffBase must be positive and backoffCap at least backoffBase")
        }
        guard requestTimeout > .zero else { throw .invalidConfiguration("requestTimeout must be positive") }
        return self
    }
}
