import AdTallyClient
import Foundation

/// Answers as AdTally would give them, built from the request the tracker sent.
enum ServerAnswers {
    /// The events of a `POST /v1/events` body.
    static func events(in request: TransportRequest) throws -> [[String: Any]] {
        guard let body = request.body,
              let object = try JSONSerialization.jsonObject(with: body) as? [String: Any],
              let events = object["events"] as? [[String: Any]] else {
            throw TestFailure("not a batch body: \(String(decoding: request.body ?? Data(), as: UTF8.self))")
        }
        return events
    }

    static func eventIDs(in request: TransportRequest) throws -> [String] {
        try events(in: request).map { $0["event_id"] as? String ?? "?" }
    }

    /// `200` with one result per event; `verdict` gives each event's status and reason.
    static func answered(_ request: TransportRequest, date: String? = nil,
                         verdict: ([String: Any]) -> (String, String?) = { _ in ("accepted", nil) }) throws -> TransportResult {
        let results: [[String: Any]] = try events(in: request).map { event in
            let (status, reason) = verdict(event)
            var result: [String: Any] = ["event_id": event["event_id"] ?? NSNull(), "status": status]
            if let reason { result["reason"] = reason }
            return result
        }
        let body = try JSONSerialization.data(withJSONObject: ["results": results])
        return .response(TransportResponse(status: 200, headers: date.map { ["Date": $0] } ?? [:], body: body))
    }

    /// An error answer with the contract's body.
    static func error(_ status: Int, _ code: String, headers: [String: String] = [:]) -> TransportResult {
        let body = Data(#"{"error":{"code":"\#(code)","message":"refused in a test"}}"#.utf8)
        return .response(TransportResponse(status: status, headers: headers, body: body))
    }

    /// `GET /healthz`'s answer with a `Date` header.
    static func healthy(date: String?) -> TransportResult {
        .response(TransportResponse(status: 200, headers: date.map { ["Date": $0] } ?? [:], body: Data(#"{"status":"ok"}"#.utf8)))
    }

    /// IMF-fixdate of `date`, as a server writes its `Date` header.
    static func imfFixdate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
