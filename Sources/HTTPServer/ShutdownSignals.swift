import Dispatch
import Glibc
import Synchronization

/// Turns `SIGTERM` and `SIGINT` into a graceful `HTTPServer.shutdown`, via Dispatch signal sources
/// (the signals are ignored first so their default action, terminating, does not race the source).
/// Keep the returned value alive as long as the handlers should stay installed.
public final class ShutdownSignals: Sendable {
    private let sources: Mutex<[any DispatchSourceSignal]>

    /// Installs handlers for `signals` that call `beforeShutdown` (e.g. to log) and then shut the
    /// server down with `gracePeriod`, on a background queue. A second signal while shutting down is
    /// ignored (the deadline already bounds the wait).
    public init(server: HTTPServer, signals: [Int32] = [SIGTERM, SIGINT], gracePeriod: Duration = .seconds(10),
                beforeShutdown: @escaping @Sendable (Int32) -> Void = { _ in }) {
        let queue = DispatchQueue(label: "http.signals")
        sources = Mutex(signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                beforeShutdown(number)
                DispatchQueue.global().async { server.shutdown(gracePeriod: gracePeriod) }
            }
            source.resume()
            return source
        })
    }

    /// Removes the handlers (the signals stay ignored).
    public func cancel() {
        sources.withLock { for s in $0 { s.cancel() } }
    }
}
