import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where the package and the built binary live.
enum Paths {
    /// The package root, from this file's path (Tests/EndToEndTests/Support/ChildProcess.swift).
    static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static let migrationsDirectory = repositoryRoot.appendingPathComponent("migrations")

    /// `adtally`, built beside the test bundle; else `.build/debug/adtally`.
    static let binary: URL = {
        let besideTests = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("adtally")
        if FileManager.default.isExecutableFile(atPath: besideTests.path) { return besideTests }
        return repositoryRoot.appendingPathComponent(".build/debug/adtally")
    }()

    /// `adtally-client-harness`, beside `adtally`.
    static let clientHarness = binary.deletingLastPathComponent().appendingPathComponent("adtally-client-harness")

    /// The number of migration files (`NNNN_name.sql`).
    static func migrationFileCount() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: migrationsDirectory.path)
            .filter { $0.hasSuffix(".sql") }.count
    }
}

/// Bytes a child writes to one pipe, read on a thread of their own so the child never blocks on a
/// full pipe; tests wait on its content with a deadline. `@unchecked Sendable`: `data` and `closed`
/// are only touched while holding `condition`.
final class OutputCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var data = Data()
    private var closed = false

    private func append(_ chunk: Data) {
        condition.lock(); data.append(chunk); condition.broadcast(); condition.unlock()
    }

    private func close() {
        condition.lock(); closed = true; condition.broadcast(); condition.unlock()
    }

    var text: String {
        condition.lock(); defer { condition.unlock() }
        return String(decoding: data, as: UTF8.self)
    }

    /// Waits until `match` finds something in the text so far, the pipe ends, or `deadline` passes.
    func wait<T>(until deadline: Date, _ match: (String) -> T?) -> T? {
        condition.lock(); defer { condition.unlock() }
        while true {
            if let found = match(String(decoding: data, as: UTF8.self)) { return found }
            if closed || Date() >= deadline { return nil }
            _ = condition.wait(until: deadline)
        }
    }

    /// Waits for end of file; false when `deadline` passes first.
    func waitForEnd(until deadline: Date) -> Bool {
        condition.lock(); defer { condition.unlock() }
        while !closed {
            if Date() >= deadline { return false }
            _ = condition.wait(until: deadline)
        }
        return true
    }

    static func draining(_ handle: FileHandle) -> OutputCollector {
        let collector = OutputCollector()
        let fd = handle.fileDescriptor
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    collector.append(Data(buffer[0..<count]))
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            collector.close()
        }
        thread.start()
        return collector
    }
}

/// A running child process with its standard output and error collected. `@unchecked Sendable`:
/// after `init` nothing is mutated; `Process` is only asked to signal and read its status, and the
/// exit is observed through a semaphore.
final class ChildProcess: @unchecked Sendable {
    let process: Process
    let stdout: OutputCollector
    let stderr: OutputCollector
    private let outPipe = Pipe()
    private let errPipe = Pipe()
    private let exited = DispatchSemaphore(value: 0)

    /// The environment of this test process without any variable AdTally reads, plus `variables`.
    static func environment(_ variables: [String: String]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { key, _ in
            !["DATABASE_URL", "HOST", "PORT", "LOG_LEVEL"].contains(key) && !key.hasPrefix("ADTALLY_")
        }
        for (key, value) in variables { environment[key] = value }
        return environment
    }

    init(executable: URL = Paths.binary, arguments: [String], environment: [String: String]) throws {
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        process.standardOutput = outPipe
        process.standardError = errPipe
        let exited = self.exited
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        stdout = OutputCollector.draining(outPipe.fileHandleForReading)
        stderr = OutputCollector.draining(errPipe.fileHandleForReading)
    }

    /// Waits for the exit: the exit code, 128 + signal for a death by signal, nil on timeout.
    func wait(timeout: TimeInterval) -> Int32? {
        if exited.wait(timeout: .now() + timeout) == .timedOut { return nil }
        exited.signal() // later waits return at once
        // Let the readers see end of file, so the output is complete (bounded).
        _ = stdout.waitForEnd(until: Date() + 2)
        _ = stderr.waitForEnd(until: Date() + 2)
        switch process.terminationReason {
        case .exit: return process.terminationStatus
        case .uncaughtSignal: return 128 + process.terminationStatus
        @unknown default: return -1
        }
    }

    func send(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// For failure paths: SIGKILL if still running, and reap.
    func killAndReap() {
        guard process.isRunning else { return }
        send(SIGKILL)
        _ = wait(timeout: 5)
    }

    /// Runs `adtally arguments` to completion (bounded) and returns (exit code, stdout, stderr).
    static func run(_ arguments: [String], environment: [String: String], timeout: TimeInterval = 30) throws
        -> (status: Int32?, stdout: String, stderr: String)
    {
        let child = try ChildProcess(arguments: arguments, environment: environment)
        defer { child.killAndReap() }
        let status = child.wait(timeout: timeout)
        return (status, child.stdout.text, child.stderr.text)
    }
}
