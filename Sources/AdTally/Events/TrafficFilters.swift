import Foundation
import HTTP
import HTTPServer
import Runtime
import Synchronization

/// The traffic filters' lists (API.md, "Traffic filters"): bot agents and blocked addresses from
/// the files the configuration names, read at start (a bad file stops the
/// start with one line naming the file and its first bad line) and again on `SIGHUP`, without a
/// restart and without failing a request: a good reload replaces both lists at once, a bad one
/// keeps the lists in force and logs an error naming the file and line.
public final class TrafficFilters: Sendable {
    /// Both lists, replaced together.
    public struct Lists: Sendable, Equatable {
        public var agents = AgentPatterns()
        public var addresses = AddressRanges()

        public init(agents: AgentPatterns = AgentPatterns(), addresses: AddressRanges = AddressRanges()) {
            self.agents = agents
            self.addresses = addresses
        }
    }

    /// A list's file, and the variable that named it (for the line an operator reads).
    public struct ListFile: Sendable, Equatable {
        /// The file's path.
        public var path: String
        /// The environment variable that named it.
        public var variable: String

        /// A list file at `path`, named by `variable`.
        public init(path: String, variable: String) {
            self.path = path
            self.variable = variable
        }
    }

    /// A list file that cannot be used; its description is the one line the operator sees.
    public struct BadFile: Error, CustomStringConvertible, Equatable {
        /// The file, and the variable that named it.
        public let file: ListFile
        /// What is wrong with it.
        public let message: String

        public var description: String { "\(file.variable) \(message)" }
    }

    private let agentsFile: ListFile?
    private let addressesFile: ListFile?
    private let lists: Mutex<Lists>
    /// Whether a file is named or a list holds anything, kept with the lists: read on every
    /// request without taking their lock.
    private let active: Atomic<Bool>

    /// Reads the files; throws naming the variable, the file and its first bad line.
    public init(agentsFile: ListFile?, addressesFile: ListFile?) throws(BadFile) {
        self.agentsFile = agentsFile
        self.addressesFile = addressesFile
        let read = try Self.read(agentsFile: agentsFile, addressesFile: addressesFile)
        lists = Mutex(read)
        active = Atomic(agentsFile != nil || addressesFile != nil || !read.agents.isEmpty || !read.addresses.isEmpty)
    }

    /// Lists given as they are (tests, and a process without filters).
    public init(_ lists: Lists = Lists()) {
        agentsFile = nil
        addressesFile = nil
        self.lists = Mutex(lists)
        active = Atomic(!lists.agents.isEmpty || !lists.addresses.isEmpty)
    }

    /// The lists in force.
    public var current: Lists { lists.withLock { $0 } }

    /// Whether anything is filtered at all (no file named: the route skips the work).
    public var isActive: Bool { active.load(ordering: .relaxed) }

    /// The verdict on a request with `userAgent` (nil: the header was absent, which no agent
    /// filter refuses) from `client`: the agent first, then the address.
    public func verdict(userAgent: String?, client: IPAddress?) -> TrafficFilterVerdict? {
        let lists = current
        if let userAgent, lists.agents.matches(userAgent) { return .botAgent }
        if let client, lists.addresses.contains(client) { return .blockedAddress }
        return nil
    }

    /// Reads both files again (`SIGHUP`): a good pair replaces the lists and is logged with its
    /// sizes; a bad file keeps the lists in force and is logged as an error naming it and its line.
    /// Returns whether the lists were replaced.
    @discardableResult
    public func reload(logger: Logger) -> Bool {
        guard agentsFile != nil || addressesFile != nil else {
            logger.info("traffic filters: no file to reload")
            return false
        }
        do {
            let fresh = try Self.read(agentsFile: agentsFile, addressesFile: addressesFile)
            lists.withLock { $0 = fresh }
            logger.info("traffic filters reloaded", [("bot_agent_patterns", .int(fresh.agents.patternCount)),
                                                     ("blocked_address_entries", .int(fresh.addresses.entryCount))])
            return true
        } catch {
            logger.error("traffic filters not reloaded: the lists in force stay", [("error", .string(error.description))])
            return false
        }
    }

    private static func read(agentsFile: ListFile?, addressesFile: ListFile?) throws(BadFile) -> Lists {
        var lists = Lists()
        if let agentsFile {
            lists.agents = try read(agentsFile, problem: "has a control character") { text throws(AgentPatterns.BadLine) in
                try AgentPatterns.parse(lines: text)
            }
        }
        if let addressesFile {
            lists.addresses = try read(addressesFile, problem: "is not an IPv4 or IPv6 address or CIDR range") { text throws(AddressRanges.BadEntry) in
                try AddressRanges.parse(lines: text)
            }
        }
        return lists
    }

    /// One list from `file`: its first bad line is named with `problem`.
    private static func read<List, Bad: BadListLine>(_ file: ListFile, problem: String,
                                                     _ parse: (String) throws(Bad) -> List) throws(BadFile) -> List {
        let text = try contents(of: file)
        do throws(Bad) {
            return try parse(text)
        } catch {
            throw BadFile(file: file, message: "\(file.path) line \(error.lineNumber) \(problem): \(error.text.quotedExcerpt)")
        }
    }

    private static func contents(of file: ListFile) throws(BadFile) -> String {
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw BadFile(file: file, message: "names \(file.path), which cannot be read")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw BadFile(file: file, message: "names \(file.path), which is not UTF-8 text")
        }
        return text
    }
}

/// A bad line of a list file, as the error line names it.
protocol BadListLine: Error {
    /// Its line in the file (1-based; 0 when it came from elsewhere).
    var lineNumber: Int { get }
    var text: String { get }
}

extension AgentPatterns.BadLine: BadListLine {
    var lineNumber: Int { line }
}

extension AddressRanges.BadEntry: BadListLine {
    var lineNumber: Int { line ?? 0 }
}
