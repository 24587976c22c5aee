import Foundation

/// What an attempt to send a batch means for the queue, decided from the transport's result alone
/// (a pure function, so that every status has a test):
/// - `200` with one result per event, in order: answered.
/// - no answer, `408`, `429`, `5xx`, or anything unexpected (a `200` that cannot be read, a `3xx`):
///   send the same bytes again after a backoff; the server's idempotency makes that safe.
/// - `413`: the batch is too large for this server; split it.
/// - any other `4xx`: the server will refuse these bytes forever (a client bug, a wrong endpoint);
///   drop the batch and report why, rather than retry it forever.
enum BatchAnswer: Equatable {
    case answered([EventOutcome])
    case retry(reason: String, retryAfter: Duration?)
    case tooLarge
    case refused(status: Int, code: String?, message: String?)

    static func classify(_ result: TransportResult, events: [TrackedEvent]) -> BatchAnswer {
        let response: TransportResponse
        switch result {
        case let .failure(reason): return .retry(reason: reason, retryAfter: nil)
        case let .response(answer): response = answer
        }
        let retryAfter = BackoffPolicy.retryAfter(response.header("retry-after"), date: response.header("date"))
        switch response.status {
        case 200:
            guard let outcomes = outcomes(of: response.body, for: events) else {
                return .retry(reason: "200 with an answer that does not match the batch", retryAfter: retryAfter)
            }
            return .answered(outcomes)
        case 408, 429, 500...599:
            let code = errorBody(response.body).code.map { code in " \(code)" } ?? ""
            return .retry(reason: "\(response.status)\(code)", retryAfter: retryAfter)
        case 413:
            return .tooLarge
        case 400...499:
            let error = errorBody(response.body)
            return .refused(status: response.status, code: error.code, message: error.message)
        default:
            return .retry(reason: "unexpected status \(response.status)", retryAfter: retryAfter)
        }
    }

    /// One outcome per event from `{"results": [...]}`, matched by position and checked by id; nil
    /// when the answer does not fit the batch.
    static func outcomes(of body: Data, for events: [TrackedEvent]) -> [EventOutcome]? {
        guard let results = AnswerScanner.results(Array(body)) ?? parsedResults(body), results.count == events.count
        else { return nil }
        var outcomes: [EventOutcome] = []
        outcomes.reserveCapacity(events.count)
        var expected: [UInt8] = []
        expected.reserveCapacity(36)
        for (event, result) in zip(events, results) {
            expected.removeAll(keepingCapacity: true)
            EventEncoder.appendLowercaseUUID(event.eventID, to: &expected)
            guard result.hasID(expected), let statusText = result.status,
                  let status = EventOutcome.Status(rawValue: statusText) else { return nil }
            outcomes.append(EventOutcome(eventID: event.eventID, type: event.type, sessionID: event.sessionID,
                                         adID: event.adID, status: status, reason: result.reason,
                                         field: result.field, message: result.message))
        }
        return outcomes
    }

    /// The results by the general JSON parser, for answers the scanner does not read.
    static func parsedResults(_ body: Data) -> [AnswerScanner.Result]? {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let parsed = object["results"] as? [[String: Any]] else { return nil }
        return parsed.map { entry in
            AnswerScanner.Result(eventID: entry["event_id"] as? String, status: entry["status"] as? String,
                                 reason: entry["reason"] as? String, field: entry["field"] as? String,
                                 message: entry["message"] as? String)
        }
    }

    /// `error.code` and `error.message` of the contract's error body, when it is one.
    private static func errorBody(_ body: Data) -> (code: String?, message: String?) {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let error = object["error"] as? [String: Any] else { return (nil, nil) }
        return (error["code"] as? String, error["message"] as? String)
    }
}
