import Contract
import Foundation
import HTTP
import HTTPServer
import Postgres
import Synchronization
import Timestamps

/// The Prometheus series of API.md section 4, kept in memory per process and rendered in text
/// exposition format 0.0.4. Label values come only from bounded sets (route patterns, known
/// methods, status codes, event types and reason codes), so a client cannot grow the series.
public final class Metrics: HTTPServerObserver, Sendable {
    /// Histogram bucket bounds for request durations, in seconds.
    static let durationBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct RequestKey: Hashable { let route: String; let method: String; let status: Int }
    /// Kept as the enums (cheap to hash once per event); the label texts are made when rendering.
    struct EventKey: Hashable {
        let eventType: EventType?
        let status: EventOutcome.Status
        let why: EventOutcome.Reason?
        var type: String { eventType?.rawValue ?? "unknown" }
        var outcome: String { status.rawValue }
        var reason: String { why?.rawValue ?? "" }
    }

    struct Histogram {
        var buckets = [UInt64](repeating: 0, count: Metrics.durationBounds.count)
        var count: UInt64 = 0
        var sum: Double = 0

        mutating func observe(_ value: Double) {
            count += 1
            sum += value
            for (index, bound) in Metrics.durationBounds.enumerated() where value <= bound {
                buckets[index] += 1
            }
        }
    }

    private struct State {
        var requests: [RequestKey: UInt64] = [:]
        var durations: [String: Histogram] = [:]
        var events: [EventKey: UInt64] = [:]
        var maintenanceRuns: [String: UInt64] = [:]
        var oldestReceived: Timestamp?
        var finalBefore: Timestamp?
        var sessionsErased: UInt64 = 0
        var adjustments: [String: UInt64] = [:]
        var creditedImpressions: UInt64 = 0
        var creditedClicks: UInt64 = 0
    }

    private let state = Mutex(State())
    private let server = Mutex<(@Sendable () -> ServerStatistics)?>(nil)

    public init() {}

    /// Where the HTTP server's gauges and counters are read from, once the server exists.
    public func setServerSource(_ source: @escaping @Sendable () -> ServerStatistics) {
        server.withLock { $0 = source }
    }

    /// Called by the server once per response, on an IO queue: one lock, a few dictionary updates.
    public func didRespond(_ record: ResponseRecord) {
        let method: String
        switch record.method {  // the known methods; anything else is one label value
        case .get?, .post?, .put?, .head?, .delete?, .patch?, .options?: method = record.method?.rawValue ?? "other"
        default: method = "other"
        }
        state.withLock { state in
            state.requests[RequestKey(route: record.route, method: method, status: record.status), default: 0] += 1
            state.durations[record.route, default: Histogram()].observe(record.durationSeconds)
        }
        if let answered = record.observation as? AnsweredEvents { self.record(answered.outcomes) }
    }

    /// Counts the answered events of one request by the status each was answered with (replays
    /// included): one lock per request, not per event, since 64 handler threads share it.
    func record(_ answered: [(type: EventType?, outcome: EventOutcome)]) {
        var counts: [EventKey: UInt64] = [:]
        for (type, outcome) in answered {
            counts[EventKey(eventType: type, status: outcome.status, why: outcome.reason), default: 0] += 1
        }
        state.withLock { state in
            for (key, count) in counts { state.events[key, default: 0] += count }
        }
    }

    /// Counts a maintenance run that ended with `result` and keeps what it learnt of the history.
    public func record(maintenanceRun result: String, oldestReceived: Timestamp?, finalBefore: Timestamp?) {
        state.withLock { state in
            state.maintenanceRuns[result, default: 0] += 1
            if let oldestReceived { state.oldestReceived = oldestReceived }
            if let finalBefore { state.finalBefore = finalBefore }
        }
    }

    /// Counts an adjustment made by this process and the events it credited (API 1.4).
    public func recordAdjustment(reason: String, impressions: Int64, clicks: Int64) {
        state.withLock { state in
            state.adjustments[reason, default: 0] += 1
            state.creditedImpressions += UInt64(clamping: impressions)
            state.creditedClicks += UInt64(clamping: clicks)
        }
    }

    /// Counts a session erased (suppressed) by this process (API 1.4).
    public func recordErasure() {
        state.withLock { $0.sessionsErased += 1 }
    }

    /// The series of API 1.4's credits and erasures.
    static func renderAfterTheFact(_ snapshot: (erased: UInt64, adjustments: [String: UInt64], impressions: UInt64, clicks: UInt64)) -> String {
        var out = ""
        series(&out, "adtally_sessions_erased_total", "counter", "Sessions erased (and suppressed) by DELETE /v1/sessions/{id}.", "\(snapshot.erased)")
        // One series per reason an adjustment of this process was made for (the reasons are a
        // closed set of three; a reason appears with its first adjustment).
        header(&out, "adtally_adjustments_total", "counter", "Adjustments (credits) made, by reason.")
        for (reason, count) in snapshot.adjustments.sorted(by: { $0.key < $1.key }) {
            out += "adtally_adjustments_total{reason=\"\(escape(reason))\"} \(count)\n"
        }
        header(&out, "adtally_credited_events_total", "counter", "Billed events credited by adjustments, by type.")
        out += "adtally_credited_events_total{type=\"impression\"} \(snapshot.impressions)\n"
        out += "adtally_credited_events_total{type=\"click\"} \(snapshot.clicks)\n"
        return out
    }

    /// The series of API 1.5's advertiser keys: the keys of the database as this process last read
    /// them, and how the edge answered each credential (never a key or a token in a label).
    static func renderAccess(keys: (active: Int, revoked: Int), auth: [(credential: AuthCounts.Credential, outcome: AuthCounts.Outcome, count: UInt64)]) -> String {
        var out = ""
        header(&out, "adtally_advertiser_keys", "gauge", "Advertiser keys of the database as this process last read them, by state.")
        out += "adtally_advertiser_keys{state=\"active\"} \(keys.active)\n"
        out += "adtally_advertiser_keys{state=\"revoked\"} \(keys.revoked)\n"
        header(&out, "adtally_auth_total", "counter", "Requests that presented a credential, by its kind and what became of it.")
        for series in auth {
            out += "adtally_auth_total{credential=\"\(series.credential.rawValue)\",outcome=\"\(series.outcome.rawValue)\"} \(series.count)\n"
        }
        return out
    }

    /// The newest `final_before` this process read or published.
    public func record(finalBefore: Timestamp) {
        state.withLock { state in
            if state.finalBefore.map({ $0 < finalBefore }) ?? true { state.finalBefore = finalBefore }
        }
    }

    /// The exposition text. `reports` adds the reports database's series when it has one of its
    /// own; `maintenanceResults` are the results a maintenance run may end with, each a series
    /// from the start (zero included).
    func render(pool: PostgresPool, reports: ReadDatabase?, limits: ClientLimits, keys: AdvertiserKeyring, auth: AuthCounts,
                maintenanceResults: [String]) -> String {
        let snapshot = state.withLock { $0 }
        let statistics = server.withLock { $0 }?() ?? ServerStatistics()
        let connections = statistics.openConnections
        var out = ""
        out.reserveCapacity(4096)
        Self.header(&out, "adtally_http_requests_total", "counter", "HTTP responses sent, by route pattern, method and status.")
        for (key, value) in snapshot.requests.sorted(by: { ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status) }) {
            out += "adtally_http_requests_total{route=\"\(Self.escape(key.route))\",method=\"\(key.method)\",status=\"\(key.status)\"} \(value)\n"
        }
        Self.header(&out, "adtally_http_request_duration_seconds", "histogram", "Time from the end of a request head to the last byte of its response.")
        for (route, histogram) in snapshot.durations.sorted(by: { $0.key < $1.key }) {
            let label = "route=\"\(Self.escape(route))\""
            for (index, bound) in Self.durationBounds.enumerated() {
                out += "adtally_http_request_duration_seconds_bucket{\(label),le=\"\(Self.format(bound))\"} \(histogram.buckets[index])\n"
            }
            out += "adtally_http_request_duration_seconds_bucket{\(label),le=\"+Inf\"} \(histogram.count)\n"
            out += "adtally_http_request_duration_seconds_sum{\(label)} \(Self.format(histogram.sum))\n"
            out += "adtally_http_request_duration_seconds_count{\(label)} \(histogram.count)\n"
        }
        Self.header(&out, "adtally_events_total", "counter", "Events answered, by type, the status they were answered with, and reason.")
        for (key, value) in snapshot.events.sorted(by: { ($0.key.type, $0.key.outcome, $0.key.reason) < ($1.key.type, $1.key.outcome, $1.key.reason) }) {
            out += "adtally_events_total{type=\"\(key.type)\",outcome=\"\(key.outcome)\",reason=\"\(key.reason)\"} \(value)\n"
        }
        Self.series(&out, "adtally_http_connections_open", "gauge", "HTTP connections open now.", "\(connections)")
        Self.header(&out, "adtally_http_rate_limited_total", "counter", "Requests refused 429 by a limit per client (events, connections, auth).")
        for (limit, refusals) in limits.refusalsByLimit {
            out += "adtally_http_rate_limited_total{limit=\"\(limit)\"} \(refusals)\n"
        }
        Self.series(&out, "adtally_http_clients_tracked", "gauge", "Client addresses the limits per client remember now (at most 100,000).", "\(limits.trackedClients)")
        Self.series(&out, "adtally_http_buffered_body_bytes", "gauge", "Bytes of request bodies held in memory now (at most ADTALLY_MAX_BUFFERED_BYTES).", "\(statistics.bufferedBodyBytes)")
        Self.series(&out, "adtally_http_accept_pauses_total", "counter", "Times accepting paused because no file descriptor was free.", "\(statistics.acceptPauses)")
        Self.series(&out, "adtally_log_lines_dropped_total", "counter", "Log lines dropped because standard output could not take them.", "\(statistics.droppedLogLines)")
        Self.series(&out, "adtally_db_pool_connections_in_use", "gauge", "Database connections borrowed now.", "\(pool.connectionsInUse)")
        Self.series(&out, "adtally_db_pool_connections", "gauge", "Database connections open now, idle or borrowed.", "\(pool.connectionsOpen)")
        if let reports = reports?.ownDatabase {
            Self.series(&out, "adtally_reports_database_up", "gauge", "Whether the last read of the reports database (ADTALLY_REPORTS_DATABASE_URL) reached it.", "\(reports.reachable ? 1 : 0)")
            Self.series(&out, "adtally_reports_database_failures_total", "counter", "Reads answered 503 because the reports database could not be used.", "\(reports.failures)")
            Self.series(&out, "adtally_reports_db_pool_connections_in_use", "gauge", "Reports database connections borrowed now.", "\(reports.pool.connectionsInUse)")
            Self.series(&out, "adtally_reports_db_pool_connections", "gauge", "Reports database connections open now, idle or borrowed.", "\(reports.pool.connectionsOpen)")
        }
        Self.header(&out, "adtally_maintenance_runs_total", "counter", "Maintenance runs of this process, by result (skipped: another process held the work).")
        for result in maintenanceResults {
            out += "adtally_maintenance_runs_total{result=\"\(result)\"} \(snapshot.maintenanceRuns[result, default: 0])\n"
        }
        if let oldest = snapshot.oldestReceived {
            Self.series(&out, "adtally_events_oldest_received_seconds", "gauge", "Unix time of the oldest raw event kept.", "\(Self.format(Double(oldest.microsecondsSinceEpoch) / 1_000_000))")
        }
        if let finalBefore = snapshot.finalBefore {
            Self.series(&out, "adtally_reports_final_before_seconds", "gauge", "Unix time before which every received event is in the reports' counts.", "\(Self.format(Double(finalBefore.microsecondsSinceEpoch) / 1_000_000))")
        }
        out += Self.renderAfterTheFact((snapshot.sessionsErased, snapshot.adjustments, snapshot.creditedImpressions, snapshot.creditedClicks))
        out += Self.renderAccess(keys: keys.counts, auth: auth.all)
        Self.header(&out, "adtally_build_info", "gauge", "The running build: always 1, labelled with its version.")
        out += "adtally_build_info{version=\"\(Self.escape(BuildInfo.version))\"} 1\n"
        Self.render(ProcessMetrics.current(), into: &out)
        return out
    }

    /// The `# HELP` and `# TYPE` lines of series `name`.
    static func header(_ out: inout String, _ name: String, _ type: String, _ help: String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    /// A series without labels: its `# HELP` and `# TYPE` lines and its value (nothing when nil).
    static func series(_ out: inout String, _ name: String, _ type: String, _ help: String, _ value: String?) {
        guard let value else { return }
        header(&out, name, type, help)
        out += "\(name) \(value)\n"
    }

    /// The `process_*` series of Prometheus's client libraries, under their usual names and help.
    static func render(_ process: ProcessMetrics, into out: inout String) {
        series(&out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
               process.cpuSeconds.map(format))
        series(&out, "process_open_fds", "gauge", "Number of open file descriptors.", process.openFileDescriptors.map(String.init))
        series(&out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
               process.residentMemoryBytes.map(String.init))
        series(&out, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
               process.startTimeSeconds.map(format))
    }

    /// Label value escaping of the text format: backslash, double quote and line feed.
    static func escape(_ value: String) -> String {
        var escaped = ""
        for character in value {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }
}

extension Metrics: CreditMetrics, ErasureMetrics, MaintenanceMetrics {}

/// What the HTTP server reports for `/metrics`.
public struct ServerStatistics: Sendable {
    public var openConnections = 0
    public var bufferedBodyBytes = 0
    public var droppedLogLines = 0
    public var acceptPauses = 0

    public init(openConnections: Int = 0, bufferedBodyBytes: Int = 0, droppedLogLines: Int = 0, acceptPauses: Int = 0) {
        self.openConnections = openConnections
        self.bufferedBodyBytes = bufferedBodyBytes
        self.droppedLogLines = droppedLogLines
        self.acceptPauses = acceptPauses
    }
}
