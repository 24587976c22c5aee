import CLibPQ
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Every wait for the server, bounded by `answerTimeout`. The connection's socket is non-blocking:
/// a statement is queued with libpq's `PQsend*`, flushed while polling, and its results are read
/// only once libpq has them whole, so no call can block past the deadline. (`PQexec` and friends
/// would wait forever on a server that stopped without closing its sockets.)
extension PostgresConnection {
    /// When the current exchange must have its answer: `answerTimeout` from now, or never.
    func answerDeadline() -> ContinuousClock.Instant? {
        answerTimeout.map { ContinuousClock.now + $0 }
    }

    /// Sends one command with `send` (a `PQsend*` call) and returns its result as `PQexec` would:
    /// the last result, or the first error. Throws `connectionLost` when the connection broke or
    /// the server did not answer within `answerTimeout`.
    func exchange(on handle: OpaquePointer, _ send: () -> Int32) throws -> PostgresResult {
        let deadline = answerDeadline()
        guard send() == 1 else {
            stateUnknown = true
            throw connectionError(fallback: "could not send the statement")
        }
        try flush(handle, until: deadline)
        var last: OpaquePointer?
        var failed: OpaquePointer?
        defer {
            if let last { PQclear(last) }
            if let failed { PQclear(failed) }
        }
        while true {
            try awaitResult(handle, until: deadline)
            guard let raw = PQgetResult(handle) else { break }
            switch PQresultStatus(raw) {
            case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
                // libpq would hand this result back forever; `check` marks the connection lost.
                return try check(raw)
            case PGRES_FATAL_ERROR where failed == nil:
                failed = raw
            case PGRES_FATAL_ERROR:
                PQclear(raw)
            default:
                if let last { PQclear(last) }
                last = raw
            }
        }
        // The error result is freed by the `defer` above; `statementError` only reads it.
        if let failed { throw statementError(failed) }
        guard let result = last else { return try check(nil) }
        last = nil
        return try check(result)
    }

    /// Sends what libpq buffered, reading what the server answers meanwhile so that neither side
    /// can block the other with full socket buffers (libpq's advice for pipelines).
    func flush(_ handle: OpaquePointer, until deadline: ContinuousClock.Instant?) throws {
        while true {
            let flushed = PQflush(handle)
            if flushed == 0 { return }
            guard flushed > 0 else {
                stateUnknown = true
                throw connectionError(fallback: "could not send to the server")
            }
            let events = try poll(handle, for: Int16(POLLIN | POLLOUT), until: deadline)
            if events & Int16(POLLIN) != 0 && PQconsumeInput(handle) == 0 {
                stateUnknown = true
                throw connectionError(fallback: "connection lost while sending")
            }
        }
    }

    /// Waits until libpq holds the next result whole, so that `PQgetResult` returns at once.
    func awaitResult(_ handle: OpaquePointer, until deadline: ContinuousClock.Instant?) throws {
        while PQisBusy(handle) == 1 {
            let events = try poll(handle, for: Int16(POLLIN), until: deadline)
            // A failed read leaves libpq's error for `PQgetResult` to report (connection lost).
            if events != 0 && PQconsumeInput(handle) == 0 { return }
        }
    }

    /// Polls the socket for `events` until the deadline; gives the connection up when it passes.
    private func poll(_ handle: OpaquePointer, for events: Int16, until deadline: ContinuousClock.Instant?) throws -> Int16 {
        var descriptor = pollfd(fd: PQsocket(handle), events: events, revents: 0)
        while true {
            var milliseconds: Int32 = -1
            if let deadline {
                let left = deadline - ContinuousClock.now
                if left <= .zero { throw abandon(handle) }
                milliseconds = Int32(clamping: left.wholeMilliseconds + 1)
            }
            let ready = Glibc.poll(&descriptor, 1, milliseconds)
            if ready > 0 { return descriptor.revents }
            if ready < 0 && errno != EINTR {
                stateUnknown = true
                throw connectionError(fallback: "poll failed (errno \(errno))")
            }
        }
    }

    /// The server did not answer in time: its state is unknown (a `COMMIT` may or may not have
    /// happened), so the connection is shut down and never lent again. Only the socket is shut
    /// here; the pool frees the handle.
    private func abandon(_ handle: OpaquePointer) -> PostgresError {
        stateUnknown = true
        // The server may still be working on the statement (a long fold, a report's scan): ask it
        // to cancel it, so that giving up here does not leave it running there. PQcancel opens a
        // connection of its own and may block (a hung server is why we give up), so it runs on a
        // thread of its own; its cancel object is independent of this connection.
        if let cancel = PQgetCancel(handle) {
            let request = CancelRequest(cancel)
            let thread = Thread { request.send() }
            thread.name = "adtally-pg-cancel"
            thread.start()
        }
        let socket = PQsocket(handle)
        if socket >= 0 { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        let limit = answerTimeout.map { "\($0)" } ?? "its deadline"
        return PostgresError(kind: .connectionLost, message: "no answer from the server within \(limit); connection given up")
    }
}

/// A cancel request for a statement given up (`PQcancel`), sent once from a thread of its own.
/// `@unchecked Sendable`: the libpq cancel object is used by that one thread only, then freed.
final class CancelRequest: @unchecked Sendable {
    private let cancel: OpaquePointer

    init(_ cancel: OpaquePointer) {
        self.cancel = cancel
    }

    func send() {
        var buffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancel, &buffer, Int32(buffer.count))
        PQfreeCancel(cancel)
    }
}
