@testable import AdTallyClient
import Foundation
import Testing

/// A tracker on a manual clock and a hand-answered transport, with its reports collected: what
/// most tracker tests start from. The clock probe is answered at once with the server's clock
/// (the manual clock plus `serverSkew`) unless `answersProbe` is false.
struct TrackerFixture {
    let clock: ManualClock
    let transport: HeldTransport
    let reports: ReportLog
    let tracker: AdTallyTracker

    static let endpoint = URL(string: "http://adtally.test")!

    init(storage: TrackerStorage = .memory, serverSkew: TimeInterval = 0, answersProbe: Bool = true,
         clock: ManualClock = ManualClock(), journal: (any EventJournal)? = nil,
         configure: (inout TrackerConfiguration) -> Void = { _ in }) throws {
        self.clock = clock
        let reports = ReportLog()
        self.reports = reports
        transport = HeldTransport(clock: clock) { [clock] request in
            guard answersProbe, request.path == "/healthz" else { return nil }
            return ServerAnswers.healthy(date: ServerAnswers.imfFixdate(clock.now().addingTimeInterval(serverSkew)))
        }
        var configuration = TrackerConfiguration(endpoint: Self.endpoint, storage: storage)
        configuration.clock = clock
        configuration.transport = transport
        configuration.jitter = { 1 }
        configuration.observer = { reports.append($0) }
        configure(&configuration)
        if let journal {
            tracker = try AdTallyTracker(configuration: configuration, journal: journal)
        } else {
            tracker = try AdTallyTracker(configuration: configuration)
        }
        try tracker.setSession("sess-1", snapshotID: "snap-1")
    }

    /// Shuts the tracker down and checks that it stopped completely (its journal closed, so that a
    /// next tracker may open the directory) and that its sender thread ended. The timeout is
    /// generous, not the 1 s default: in a full run the database tests' set-up keeps every pool
    /// thread busy for the first minute or so, and a hang still ends as a failure.
    static let shutdownTimeout: Duration = .seconds(120)

    func shutdown(sourceLocation: SourceLocation = #_sourceLocation) async {
        let stopped = await tracker.shutdown(timeout: Self.shutdownTimeout)
        #expect(stopped, "the tracker did not stop within \(Self.shutdownTimeout)", sourceLocation: sourceLocation)
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
            #expect(tracker.senderThread?.hasEnded == true, "the sender thread is missing or outlived the shutdown",
                    sourceLocation: sourceLocation)
        } else {
            #expect(tracker.senderThread == nil, "a sender thread without task executors", sourceLocation: sourceLocation)
        }
    }

    /// Answers the next request with `200`, every event accepted, and returns the request.
    @discardableResult
    func acceptNext() async throws -> TransportRequest {
        let exchange = try await transport.next()
        exchange.answer(try ServerAnswers.answered(exchange.request))
        return exchange.request
    }
}

/// Every report the tracker's observer received, in order.
final class ReportLog: Sendable {
    private let reports = Lock<[TrackerReport]>([])

    func append(_ report: TrackerReport) { reports.withLock { $0.append(report) } }

    var all: [TrackerReport] { reports.withLock { $0 } }

    var outcomes: [EventOutcome] {
        all.flatMap { report -> [EventOutcome] in
            if case let .answered(outcomes) = report { return outcomes }
            return []
        }
    }

    var dropped: [(events: [DroppedEvent], reason: DropReason)] {
        all.compactMap { report in
            if case let .dropped(events, reason) = report { return (events, reason) }
            return nil
        }
    }
}
