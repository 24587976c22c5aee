// adtally-client-harness: a process that uses AdTallyClient as an app would, for the end-to-end
// tests that kill it with SIGKILL mid-flush and start it again on its journal.
//
//   adtally-client-harness ENDPOINT JOURNAL_DIR SESSION SNAPSHOT TRACK_COUNT AD_PREFIX
//
// Tracks TRACK_COUNT impressions (ads AD_PREFIX-0, -1, ...; none for 0), prints "persisted N" once
// the journal holds them, flushes until everything is delivered, prints "delivered" with the
// statistics, and exits 0.
import AdTallyClient
import Foundation

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 7, let endpoint = URL(string: arguments[1]), let count = Int(arguments[5]) else {
    FileHandle.standardError.write(Data("usage: adtally-client-harness ENDPOINT JOURNAL_DIR SESSION SNAPSHOT COUNT AD_PREFIX\n".utf8))
    exit(2)
}

do {
    var configuration = TrackerConfiguration(endpoint: endpoint, storage: .directory(URL(fileURLWithPath: arguments[2])))
    configuration.backoffCap = .seconds(1)
    configuration.observer = { report in
        if case let .restored(events, batches, lost) = report { say("restored \(events) events, \(batches) batches, \(lost) bytes lost") }
    }
    let tracker = try AdTallyTracker(configuration: configuration)
    try tracker.setSession(arguments[3], snapshotID: arguments[4])
    if count > 0 {
        for index in 0..<count { try tracker.impression(adID: "\(arguments[6])-\(index)", position: index) }
        try await tracker.persist()
        say("persisted \(count)")
    }
    let result = await tracker.flush(retrying: true)
    let statistics = tracker.statistics
    say("delivered \(result == .delivered) accepted=\(statistics.count(status: .accepted)) "
        + "duplicate=\(statistics.count(status: .duplicate)) rejected=\(statistics.count(status: .rejected)) "
        + "restored=\(statistics.restored)")
    await tracker.shutdown()
} catch {
    FileHandle.standardError.write(Data("adtally-client-harness: \(error)\n".utf8))
    exit(1)
}
