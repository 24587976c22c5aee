import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The tracker's transport over `URLSession`: what an app on an Apple platform gets by default
/// (HTTPS, the system's proxies and certificate checks, cellular policy). One connection per host,
/// no cache, no cookies: the tracker sends one request at a time and retries by itself.
public final class URLSessionTransport: EventTransport {
    private let baseURL: URL
    private let session: URLSession

    /// A transport to `baseURL` (AdTally's root, e.g. `https://tally.example.com`), on `session` or
    /// on an ephemeral session of its own whose requests time out after `timeout`.
    public init(baseURL: URL, session: URLSession? = nil, timeout: Duration = .seconds(30)) {
        self.baseURL = baseURL
        if let session {
            self.session = session
        } else {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpMaximumConnectionsPerHost = 1
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            configuration.urlCache = nil
            configuration.httpCookieStorage = nil
            configuration.httpShouldSetCookies = false
            let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
            configuration.timeoutIntervalForRequest = seconds
            configuration.timeoutIntervalForResource = seconds
            self.session = URLSession(configuration: configuration)
        }
    }

    /// Sends the request with `URLSession`'s data task; cancelling the calling task cancels it.
    public func send(_ request: TransportRequest) async -> TransportResult {
        var urlRequest = URLRequest(url: url(for: request.path))
        urlRequest.httpMethod = request.method
        if let body = request.body {
            urlRequest.httpBody = body
            urlRequest.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let running = Lock<URLSessionDataTask?>(nil)
        let session = self.session
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransportResult, Never>) in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    continuation.resume(returning: Self.result(data: data, response: response, error: error))
                }
                running.withLock { $0 = task }
                task.resume()
                if Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            running.withLock { $0?.cancel() }
        }
    }

    private func url(for path: String) -> URL {
        var url = baseURL
        for component in path.split(separator: "/") { url.appendPathComponent(String(component)) }
        return url
    }

    private static func result(data: Data?, response: URLResponse?, error: (any Error)?) -> TransportResult {
        if let error { return .failure("\(error.localizedDescription)") }
        guard let http = response as? HTTPURLResponse else { return .failure("not an HTTP answer") }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return .response(TransportResponse(status: http.statusCode, headers: headers, body: data ?? Data()))
    }
}
