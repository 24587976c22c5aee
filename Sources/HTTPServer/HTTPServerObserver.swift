/// Told once per response, for metrics (request counters, duration histograms). Called on an IO
/// queue: an implementation must be quick and must not block (update atomics or a mutex-held counter).
public protocol HTTPServerObserver: Sendable {
    /// A response was completely written (or the connection dropped mid-response).
    func didRespond(_ record: ResponseRecord)
}

/// An observer from a closure.
public struct ClosureObserver: HTTPServerObserver {
    private let body: @Sendable (ResponseRecord) -> Void
    /// Calls `body` for each response.
    public init(_ body: @escaping @Sendable (ResponseRecord) -> Void) { self.body = body }
    public func didRespond(_ record: ResponseRecord) { body(record) }
}
