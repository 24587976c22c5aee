import Foundation

/// `psql -tAc`, for tests that check what the database holds rather than what the API answers.
enum Psql {
    /// Runs `query` against `url` within 30 s; the trimmed output.
    static func value(_ query: String, _ url: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["psql", "-X", "-tAc", query, url]
        let output = Pipe()
        process.standardOutput = output
        let done = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in done.signal() }
        try process.run()
        let collector = OutputCollector.draining(output.fileHandleForReading)
        if done.wait(timeout: .now() + 30) == .timedOut {
            process.terminate()
            throw ServerStartError(description: "psql did not finish within 30 s")
        }
        _ = collector.waitForEnd(until: Date() + 2)
        guard process.terminationStatus == 0 else {
            throw ServerStartError(description: "psql exited \(process.terminationStatus) for: \(query)")
        }
        return collector.text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
