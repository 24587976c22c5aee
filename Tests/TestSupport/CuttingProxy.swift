import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy in front of PostgreSQL that can lose a `COMMIT`'s answer on purpose: armed,
/// it forwards the next message that commits a transaction to the server, lets the server answer
/// (it waits for the server's `ReadyForQuery`, so the commit has happened), withholds that answer
/// and closes both sides. The client sees its connection lost with the outcome unknown, which is
/// exactly the case API.md section 8 requires to be answered `503` and its retry from the ledger.
///
/// It reads PostgreSQL's wire protocol (v3) in both directions to find message boundaries: a
/// simple `Query` whose text is `COMMIT`, or a `Bind` of a statement that a `Parse` named with that
/// text (prepared or unnamed), is a commit. Everything else is forwarded as it comes.
///
/// `@unchecked Sendable`: the mutable state is behind `state`; each relayed connection's buffers
/// belong to its own thread.
public final class CuttingProxy: @unchecked Sendable {
    /// What the proxy does with the next commit it sees.
    public enum Arm: Sendable, Equatable {
        /// Forward everything.
        case none
        /// Forward the commit, let the server commit, then cut both sides before its answer.
        case loseCommitAnswer
        /// Cut both sides instead of forwarding the commit: the transaction never commits.
        case dropCommit
    }

    /// The port the proxy listens on (127.0.0.1).
    public let port: Int
    private let targetPort: Int
    private let listener: Int32
    private struct State {
        var arm = Arm.none
        var cuts = 0
        var stopped = false
        var sockets: Set<Int32> = []
    }
    private let state = Mutex(State())

    /// Listens on a free loopback port and forwards to 127.0.0.1:`targetPort`.
    public init(targetPort: Int) throws {
        self.targetPort = targetPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestDatabaseError("proxy: socket failed") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0, listen(fd, 64) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else {
            close(fd)
            throw TestDatabaseError("proxy: cannot listen")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "cutting-proxy-accept"
        thread.start()
    }

    deinit { stop() }

    /// Arms the proxy for the next commit on any connection (one shot).
    public func arm(_ arm: Arm) { state.withLock { $0.arm = arm } }

    /// How many commits the proxy has cut so far.
    public var cuts: Int { state.withLock { $0.cuts } }

    /// Stops accepting and closes every relayed connection.
    public func stop() {
        let sockets = state.withLock { state -> Set<Int32> in
            guard !state.stopped else { return [] }
            state.stopped = true
            defer { state.sockets = [] }
            return state.sockets
        }
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// A URI to `database` through the proxy.
    public func connectionString(database: String = "adtally") -> String {
        "postgresql://postgres@127.0.0.1:\(port)/\(database)"
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        defer { close(listener) }
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped, connected == 0 else { return false }
                state.sockets.formUnion([client, server])
                return true
            }
            guard accepted else {
                close(client)
                close(server)
                if state.withLock({ $0.stopped }) { return }
                continue
            }
            let thread = Thread { [self] in relay(client: client, server: server) }
            thread.name = "cutting-proxy-relay"
            thread.start()
        }
    }

    /// Moves bytes both ways until either side closes, or a commit is cut.
    private func relay(client: Int32, server: Int32) {
        defer {
            state.withLock { _ = $0.sockets.remove(client); _ = $0.sockets.remove(server) }
            close(client)
            close(server)
        }
        var frontend = MessageReader(startsUntyped: true)
        var backend = MessageReader(startsUntyped: false)
        var statements: [String: String] = [:]  // statement name -> SQL, from Parse
        var withholding = false  // the commit went to the server: its answers are held back
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, 1_000)
            if ready < 0 && errno != EINTR { return }
            if state.withLock({ $0.stopped }) { return }
            if ready <= 0 { continue }
            if fds[0].revents != 0 {
                let count = recv(client, &buffer, buffer.count, 0)
                if count <= 0 { return }
                let chunk = Array(buffer[0..<count])
                var commits = false
                for message in frontend.feed(chunk) {
                    if message.type == 0, message.body.count >= 4,
                       Array(message.body[0..<4]) == [0x04, 0xD2, 0x16, 0x2F] || Array(message.body[0..<4]) == [0x04, 0xD2, 0x16, 0x30] {
                        backend.expectSingleByteAnswer()  // SSLRequest or GSSENCRequest: 'N' or 'S'
                    }
                    if Self.isCommit(message, statements: &statements) { commits = true }
                }
                let arm = commits ? state.withLock { state -> Arm in
                    defer { state.arm = .none }
                    if state.arm != .none { state.cuts += 1 }
                    return state.arm
                } : .none
                if arm == .dropCommit { return }
                guard Self.sendAll(server, chunk) else { return }
                if arm == .loseCommitAnswer { withholding = true }
            }
            if fds[1].revents != 0 {
                let count = recv(server, &buffer, buffer.count, 0)
                if count <= 0 { return }
                let chunk = Array(buffer[0..<count])
                let messages = backend.feed(chunk)
                if withholding {
                    // Once the server is ready for the next query, the commit has run: cut.
                    if messages.contains(where: { $0.type == UInt8(ascii: "Z") }) { return }
                    continue
                }
                guard Self.sendAll(client, chunk) else { return }
            }
        }
    }

    /// Whether a frontend message commits: `Query` "COMMIT", or `Bind` of a statement parsed as "COMMIT".
    private static func isCommit(_ message: MessageReader.Message, statements: inout [String: String]) -> Bool {
        func strings(_ bytes: ArraySlice<UInt8>, count: Int) -> [String] {
            var result: [String] = []
            var rest = bytes
            while result.count < count, let end = rest.firstIndex(of: 0) {
                result.append(String(decoding: rest[rest.startIndex..<end], as: UTF8.self))
                rest = rest[(end + 1)...]
            }
            return result
        }
        func isCommitText(_ sql: String) -> Bool {
            sql.trimmingCharacters(in: .whitespacesAndNewlines.union(CharacterSet(charactersIn: ";"))).uppercased() == "COMMIT"
        }
        switch message.type {
        case UInt8(ascii: "Q"):
            return strings(message.body[...], count: 1).first.map(isCommitText) ?? false
        case UInt8(ascii: "P"):
            let parts = strings(message.body[...], count: 2)
            if parts.count == 2 { statements[parts[0]] = parts[1] }
            return false
        case UInt8(ascii: "B"):
            let parts = strings(message.body[...], count: 2)
            return parts.count == 2 && (statements[parts[1]].map(isCommitText) ?? false)
        default:
            return false
        }
    }

    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }
}

/// Splits one direction of the PostgreSQL protocol into messages: a type byte and a length that
/// counts itself, except the client's first messages (startup, SSL and GSS requests), which have
/// no type byte, and the server's one-byte answer to an SSL or GSS request.
struct MessageReader {
    struct Message {
        /// The type byte; 0 for an untyped startup-phase message.
        let type: UInt8
        let body: [UInt8]
    }

    private var buffer: [UInt8] = []
    private var untyped: Bool
    private var singleByteAnswers = 0

    init(startsUntyped: Bool) { untyped = startsUntyped }

    mutating func expectSingleByteAnswer() { singleByteAnswers += 1 }

    mutating func feed(_ bytes: [UInt8]) -> [Message] {
        buffer.append(contentsOf: bytes)
        var messages: [Message] = []
        var offset = 0
        while true {
            if singleByteAnswers > 0 {
                guard offset < buffer.count else { break }
                messages.append(Message(type: 1, body: [buffer[offset]]))
                offset += 1
                singleByteAnswers -= 1
                continue
            }
            let header = untyped ? 4 : 5
            guard buffer.count - offset >= header else { break }
            let lengthAt = untyped ? offset : offset + 1
            let length = Int(buffer[lengthAt]) << 24 | Int(buffer[lengthAt + 1]) << 16 | Int(buffer[lengthAt + 2]) << 8 | Int(buffer[lengthAt + 3])
            let total = (untyped ? 0 : 1) + length
            guard length >= 4, buffer.count - offset >= total else { break }
            let bodyStart = lengthAt + 4
            let body = Array(buffer[bodyStart..<(offset + total)])
            if untyped {
                messages.append(Message(type: 0, body: body))
                // SSLRequest (80877103) and GSSENCRequest (80877104) are followed by another untyped
                // message; the StartupMessage is the last one.
                let code = body.count >= 4 ? Array(body[0..<4]) : []
                if code != [0x04, 0xD2, 0x16, 0x2F] && code != [0x04, 0xD2, 0x16, 0x30] { untyped = false }
            } else {
                messages.append(Message(type: buffer[offset], body: body))
            }
            offset += total
        }
        buffer.removeFirst(offset)
        return messages
    }
}
