import Foundation

/// How the tracker reaches AdTally: one request at a time, an answer or the reason none came. A
/// seam, so that an app can route the tracker through its own networking stack (pinning, proxies,
/// metrics), and so that tests can answer as a server would. The tracker never sends two requests
/// through one transport at once.
public protocol EventTransport: Sendable {
    /// Sends `request` and returns the server's answer, whatever its status, or `.failure` when no
    /// complete answer arrived (the tracker then retries the same request). Returns promptly with
    /// `.failure` when the calling task is cancelled.
    func send(_ request: TransportRequest) async -> TransportResult
}

/// A request the tracker sends: `POST /v1/events` with a batch, or `GET /healthz` to learn the
/// server's clock before the first batch.
public struct TransportRequest: Sendable, Hashable {
    /// `POST` or `GET`.
    public let method: String
    /// The path below the endpoint, such as `/v1/events`.
    public let path: String
    /// The JSON body, if any (always `Content-Type: application/json`).
    public let body: Data?

    /// A request of the given parts.
    public init(method: String, path: String, body: Data?) {
        self.method = method
        self.path = path
        self.body = body
    }

    /// A batch of events.
    public static func events(_ body: Data) -> TransportRequest {
        TransportRequest(method: "POST", path: "/v1/events", body: body)
    }

    /// The liveness endpoint, asked only for its `Date` header.
    public static let clockProbe = TransportRequest(method: "GET", path: "/healthz", body: nil)
}

/// What came back.
public enum TransportResult: Sendable, Equatable {
    /// A complete answer, of any status.
    case response(TransportResponse)
    /// No complete answer (refused connection, reset, timeout, cancellation); the description is for
    /// reports and logs.
    case failure(String)
}

/// A complete HTTP answer.
public struct TransportResponse: Sendable, Equatable {
    /// The status code.
    public let status: Int
    /// Header fields with lowercased names (the tracker reads `date` and `retry-after`).
    public let headers: [String: String]
    /// The body.
    public let body: Data

    /// An answer of the given parts; header names are lowercased here.
    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }

    /// The value of a header, by name in any case.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}
