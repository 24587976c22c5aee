/// Told once per response, for metrics (request counters, duration histograms). Called on an IO
/// queue: an implementation must be quick and must not block (update atomics or a mutex-held counter).
public protocol HTTPServerObserver: Sendable {
    /// A response was completely written (or the connection dropped mid-response).
    func didRespond(_ record: ResponseRecord)
}
