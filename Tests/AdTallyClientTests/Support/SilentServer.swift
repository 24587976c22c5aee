@testable import AdTallyClient
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A server that accepts connections on a loopback port, reads every request and never answers:
/// a tracker's request to it stays in flight until the tracker gives up. One thread of its own
/// polls the listener and the connections; `stop()` ends it and closes every socket.
final class SilentServer: Sendable {
    /// The port it listens on, on 127.0.0.1.
    let port: Int
    private let listener: Int32
    /// Written to by `stop()` to wake the thread's `poll`.
    private let wake: (read: Int32, write: Int32)

    private struct State {
        var requests = 0
        var watchers: [(count: Int, outcome: FirstOutcome<Bool>)] = []
    }

    private let state = Lock(State())
    private let ended = FirstOutcome<Bool>()

    // A loopback address and a port number always make a valid URL.
    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    init() throws {
        let fd = socket(AF_INET, Self.streamType, 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0, listen(fd, 64) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        var pipeEnds: [Int32] = [-1, -1]
        guard bound == 0, pipe(&pipeEnds) == 0 else {
            close(fd)
            throw TestFailure("cannot listen on 127.0.0.1: errno \(errno)")
        }
        listener = fd
        wake = (pipeEnds[0], pipeEnds[1])
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in serve() }
        thread.name = "SilentServer"
        thread.start()
    }

    #if canImport(Glibc)
    private static let streamType = Int32(SOCK_STREAM.rawValue)
    #else
    private static let streamType = SOCK_STREAM
    #endif

    /// Requests received so far (their heads, complete).
    var requests: Int { state.withLock { $0.requests } }

    /// Returns once `count` requests have arrived in all.
    func waitForRequests(_ count: Int) async {
        let outcome = FirstOutcome<Bool>()
        let reached = state.withLock { state -> Bool in
            if state.requests < count { state.watchers.append((count, outcome)) }
            return state.requests >= count
        }
        if reached { outcome.settle(true) }
        _ = await outcome.value
    }

    /// Ends the thread and closes every socket; returns once the thread has ended.
    func stop() async {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        _ = await ended.value
    }

    private func serve() {
        var connections: [Int32: [UInt8]] = [:]
        defer {
            for fd in connections.keys { close(fd) }
            close(listener)
            close(wake.read)
            close(wake.write)
            ended.settle(true)
        }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            var polled = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
                          pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            polled += connections.keys.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&polled, nfds_t(polled.count), -1) >= 0 || errno == EINTR else { return }
            if polled[0].revents != 0 { return }
            if polled[1].revents != 0 {
                let client = accept(listener, nil, nil)
                if client >= 0 { connections[client] = [] }
            }
            for entry in polled.dropFirst(2) where entry.revents != 0 {
                let count = chunk.withUnsafeMutableBytes { recv(entry.fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else {
                    close(entry.fd)
                    connections[entry.fd] = nil
                    continue
                }
                var buffer = (connections[entry.fd] ?? []) + chunk[0..<count]
                var heads = 0
                while let end = Self.headEnd(buffer) {
                    heads += 1
                    buffer.removeFirst(end + 4)
                }
                connections[entry.fd] = buffer
                if heads > 0 { received(heads) }
            }
        }
    }

    private func received(_ heads: Int) {
        let reached = state.withLock { state -> [FirstOutcome<Bool>] in
            state.requests += heads
            let total = state.requests
            defer { state.watchers.removeAll { $0.count <= total } }
            return state.watchers.filter { $0.count <= total }.map(\.outcome)
        }
        for outcome in reached { outcome.settle(true) }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}
