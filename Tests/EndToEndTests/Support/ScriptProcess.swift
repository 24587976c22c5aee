import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A script of `scripts/` run with bash in a process group of its own, as a terminal runs a
/// command, so that a test can signal the whole group as Ctrl-C does. Its output is collected;
/// its exit is observed by a thread blocked in `waitpid`. `@unchecked Sendable`: after `init` only
/// `status` changes, under `condition`.
final class ScriptProcess: @unchecked Sendable {
    let pid: pid_t
    let stdout: OutputCollector
    let stderr: OutputCollector
    /// The read ends, kept open for as long as the collectors read them.
    private let outHandle: FileHandle
    private let errHandle: FileHandle
    private let condition = NSCondition()
    private var status: Int32?

    struct SpawnError: Error, CustomStringConvertible {
        let description: String
    }

    /// Starts `bash <repository>/scripts/<name>` with exactly `environment`.
    init(script name: String, environment: [String: String]) throws {
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw SpawnError(description: "pipe: errno \(errno)") }
        // Close-on-exec, so that children other tests spawn later do not hold the write ends open
        // (dup2 below clears the flag for the script's own copies).
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A new process group (pgid = its pid), no blocked signals, and INT and TERM at their
        // default action, as from a shell, whatever the test runner inherited.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGPIPE, SIGQUIT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)

        let path = Paths.repositoryRoot.appendingPathComponent("scripts/\(name)").path
        let arguments = ["/bin/bash", path]
        let variables = environment.map { "\($0.key)=\($0.value)" }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = variables.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, "/bin/bash", &actions, &attributes, &argv, &envp)
        close(outPipe[1])
        close(errPipe[1])
        guard spawned == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            throw SpawnError(description: "posix_spawn: \(spawned)")
        }
        pid = child
        let spawnedPID = child
        outHandle = FileHandle(fileDescriptor: outPipe[0], closeOnDealloc: true)
        errHandle = FileHandle(fileDescriptor: errPipe[0], closeOnDealloc: true)
        stdout = OutputCollector.draining(outHandle)
        stderr = OutputCollector.draining(errHandle)
        let thread = Thread { [self] in
            var raw: Int32 = 0
            while waitpid(spawnedPID, &raw, 0) == -1 && errno == EINTR {}
            // The exit code, or 128 + the signal that ended it.
            let code = raw & 0x7f == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            condition.lock()
            status = code
            condition.broadcast()
            condition.unlock()
        }
        thread.start()
    }

    /// Sends `signal` to every process of the script's group (bash, the server, the log reader).
    func signalGroup(_ signal: Int32) {
        _ = kill(-pid, signal)
    }

    /// The exit status, once the script ended within `timeout` seconds; nil otherwise.
    func wait(timeout: TimeInterval) -> Int32? {
        let deadline = Date() + timeout
        condition.lock()
        defer { condition.unlock() }
        while status == nil, Date() < deadline { _ = condition.wait(until: deadline) }
        return status
    }

    /// For failure paths: SIGKILL to the whole group, then reap (bounded).
    func killGroup() {
        condition.lock()
        let running = status == nil
        condition.unlock()
        if running { signalGroup(SIGKILL) }
        _ = wait(timeout: 10)
    }
}
