import Contract
import HTTP
import HTTPServer
import JSON
import Runtime

/// `POST /v1/events` (API.md section 2): decode, apply rule 1 here, hand the well-formed events to
/// group commit, and answer once their transaction committed. The route answers later
/// (`HTTPDeferredHandler`): no thread waits for the commit; the committer that commits the events
/// hands the answer to the connection. (A thread per waiting request cost a wake-up and a sleep per
/// request: with single events, that was about a third of AdTally's CPU.)
public struct EventRoutes: Sendable {
    let ingestor: EventIngestor
    let clock: any WallClock
    /// The traffic filters and who the client is, for their verdict on each request.
    let filters: TrafficFilters
    let clients: ClientAddressResolver
    /// The limits per client, whose events bucket the body is charged to (its head took 1 event
    /// at the edge); nil: no limits (tests).
    let limits: ClientLimits?

    public init(ingestor: EventIngestor, clock: any WallClock, filters: TrafficFilters, clients: ClientAddressResolver,
                limits: ClientLimits?) {
        self.ingestor = ingestor
        self.clock = clock
        self.filters = filters
        self.clients = clients
        self.limits = limits
    }

    static let pattern = "/v1/events"

    public func register(on edge: inout Edge) {
        // The edge takes 1 event of the client's bucket with the head (an empty bucket is refused
        // before the body is read) and checks the media type; the body is charged the rest here.
        edge.add(.post, Self.pattern, .events) { _ in .deferred(post) }
    }

    /// Bodies from this size on are priced by a scan before they are decoded when their client's
    /// bucket may not hold them (`ClientLimits.mightRefuse`); a smaller one decodes in about the
    /// time a scan takes.
    static let scanBeforeDecodeBytes = 8 * 1024

    @Sendable func post(_ context: RequestContext, _ responder: HTTPResponder) throws {
        let body = context.request.body
        // Who the client is, resolved once for the bucket and the filters (and only when one of
        // them needs it: a single event charges nothing more than its head did).
        var resolved: IPAddress??
        let client = { () -> IPAddress? in
            if let known = resolved { return known }
            let found = clients.client(peer: context.peer, headers: context.request.headers)
            resolved = .some(found)
            return found
        }
        // A large body from a client whose bucket may not hold it is charged before its events are
        // decoded, at the price a scan finds (the same as the decode's): a refused flood costs a
        // scan per request, not a decode.
        var charged = false
        if let limits, body.count >= Self.scanBeforeDecodeBytes,
           limits.mightRefuse(events: EventsRequest.maximumBatchCount, client: client) {
            try limits.chargeEvents(events: EventsRequest.cost(ofBody: body), client: client)
            charged = true
        }
        let request: EventsRequest
        do {
            request = try EventsRequest.decode(body: body, now: clock.now())
        } catch {
            // A body that is not a batch costs 1, readable or not: the head took it already.
            throw APIError(.malformedJSON, error.message)
        }
        if !charged { try limits?.chargeEvents(events: request.candidates.count, client: client) }
        // The filters judge the request (its agent, its client), and their verdict goes with each
        // of its events to the store, which applies it after rule 2 (`TrafficFilterRule`).
        let verdict = filters.isActive
            ? filters.verdict(userAgent: context.request.headers["User-Agent"], client: client())
            : nil
        var valid: [EventInput] = []
        valid.reserveCapacity(request.candidates.count)
        for candidate in request.candidates {
            if case .valid(var event) = candidate {
                event.trafficFilter = verdict
                valid.append(event)
            }
        }
        // Who sent it, for each client's turn in group commit when several clients wait: the client
        // if the bucket or the filters resolved it (every batch, when limits are on), else the TCP
        // peer (a single event is not worth parsing X-Forwarded-For again for; behind a trusted
        // proxy its events then take their turns as the proxy's).
        let turn = (resolved ?? nil) ?? context.peer
        ingestor.submit(valid, client: turn?.hashValue ?? 0) { [self] result in
            switch result {
            case .success(let outcomes): responder.respond(answer(request, outcomes))
            case .failure(let error): responder.respond(to: error)
            }
        }
    }

    /// The `200` answer: the counts, then one result per event in request order (`decided` holds
    /// the outcomes of the well-formed ones, in order), observed as `AnsweredEvents` for the metrics.
    private func answer(_ request: EventsRequest, _ decided: [EventOutcome]) -> HTTPResponse {
        var writer = JSONWriter(reservingCapacity: 96 * request.candidates.count + 64)
        var counts: [EventOutcome.Status: Int] = [:]
        var results = JSONWriter(reservingCapacity: 96 * request.candidates.count)
        results.beginArray()
        var next = 0
        var answered: [(type: EventType?, outcome: EventOutcome)] = []
        answered.reserveCapacity(request.candidates.count)
        for candidate in request.candidates {
            results.beginObject()
            results.key("event_id"); results.string(candidate.echoID)
            let outcome: EventOutcome
            var field: String?
            var message: String?
            switch candidate {
            case .valid:
                outcome = decided[next]
                next += 1
            case .invalid(_, let badField, let why, _):
                outcome = .rejected(.invalidEvent)
                field = badField
                message = why
            }
            counts[outcome.status, default: 0] += 1
            answered.append((candidate.typeForMetrics, outcome))
            results.key("status"); results.string(outcome.status.rawValue)
            if let reason = outcome.reason { results.key("reason"); results.string(reason.rawValue) }
            if let field { results.key("field"); results.string(field) }
            if let message { results.key("message"); results.string(message) }
            results.endObject()
        }
        results.endArray()
        writer.beginObject()
        for status in EventOutcome.Status.allCases {
            writer.key(status.rawValue); writer.int(counts[status, default: 0])
        }
        writer.key("results")
        var body = writer.bytes
        body.append(contentsOf: results.bytes)
        body.append(UInt8(ascii: "}"))
        var response = HTTPResponse.json(.ok, body)
        response.observation = AnsweredEvents(outcomes: answered)
        return response
    }
}

/// The events an answer of `POST /v1/events` answered, each with its type and the outcome it was
/// answered with: the answer's observation (`HTTPResponse.observation`), which `/metrics` counts
/// once the answer is sent (`adtally_events_total{type,outcome,reason}`), so that counting is not
/// a step of the event path.
public struct AnsweredEvents: Sendable {
    /// One per event of the request, in order; `type` nil when the event had no valid one.
    public let outcomes: [(type: EventType?, outcome: EventOutcome)]
}
