import Dispatch
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension EndToEnd {
    /// The traffic filters of API 1.3 through the real server: the agent and address lists, the
    /// client address behind a trusted proxy, a reload on SIGHUP while requests are in flight, and a
    /// bad file at start and at reload.
    @Suite(.timeLimit(.minutes(5))) struct TrafficFilters {
        static func files(agents: String, addresses: String) throws -> (agents: URL, addresses: URL) {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("filters-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let agentsFile = folder.appendingPathComponent("agents.txt"), addressesFile = folder.appendingPathComponent("addresses.txt")
            try agents.write(to: agentsFile, atomically: true, encoding: .utf8)
            try addresses.write(to: addressesFile, atomically: true, encoding: .utf8)
            return (agentsFile, addressesFile)
        }

        /// One impression of ad-1 in a fresh session registered for it, with `headers`; its reason
        /// (nil: accepted) and the event sent.
        static func impression(on server: ServerProcess, headers: [(String, String)], id: String = UUID().uuidString) throws -> (String?, [String: Any]) {
            let session = "s-\(UUID().uuidString.prefix(8))"
            let feed = try server.putFeed(session, snapshot: "f-\(session)", ads: [Body.ad("ad-1", 0, "acme")])
            #expect(feed.status == 201)
            let event = Body.event("impression", session: session, ad: "ad-1", id: id)
            let answer = try EventsAnswer(try server.request("POST", "/v1/events", headers: [Body.jsonType] + headers, body: Body.json(event)))
            #expect(answer.statuses.count == 1)
            return (answer.reasons.first ?? nil, event)
        }

        @Test func agentsAndAddressesAreFilteredAndTheClientIsTheProxysClient() throws {
            let files = try Self.files(agents: "# crawlers\nGoogleBot\npython-requests\n",
                                       addresses: "198.51.100.0/24\n2001:db8::/32 # documentation\n")
            let server = try ServerProcess.start(extra: [
                "ADTALLY_BOT_AGENTS_FILE": files.agents.path, "ADTALLY_BLOCKED_ADDRESSES_FILE": files.addresses.path,
                "ADTALLY_TRUSTED_PROXIES": "127.0.0.1, ::1",
            ])
            defer { server.kill() }
            // Agents, in any case; no agent at all is not filtered.
            #expect(try Self.impression(on: server, headers: [("User-Agent", "Mozilla/5.0 (compatible; Googlebot/2.1)")]).0 == "bot_agent")
            #expect(try Self.impression(on: server, headers: [("User-Agent", "PYTHON-REQUESTS/2.31")]).0 == "bot_agent")
            #expect(try Self.impression(on: server, headers: [("User-Agent", "FeedApp/3.1 (iPhone)")]).0 == nil)
            #expect(try Self.impression(on: server, headers: []).0 == nil)
            // The loopback peer is a trusted proxy: X-Forwarded-For names the client.
            #expect(try Self.impression(on: server, headers: [("X-Forwarded-For", "198.51.100.7")]).0 == "blocked_address")
            #expect(try Self.impression(on: server, headers: [("X-Forwarded-For", "2001:db8::5")]).0 == "blocked_address")
            #expect(try Self.impression(on: server, headers: [("X-Forwarded-For", "::ffff:198.51.100.9")]).0 == "blocked_address")
            #expect(try Self.impression(on: server, headers: [("X-Forwarded-For", "203.0.113.4")]).0 == nil)
            // Several headers are one list, right-most untrusted first; a malformed one is the peer's.
            #expect(try Self.impression(on: server, headers: [("X-Forwarded-For", "203.0.113.4"), ("X-Forwarded-For", "198.51.100.1, 127.0.0.1")]).0
                    == "blocked_address")
            #expect(try Self.impression(on: server, headers: [("X-Forwarded-For", "198.51.100.7:4711")]).0 == nil)
            // The agent comes first.
            #expect(try Self.impression(on: server, headers: [("User-Agent", "googlebot"), ("X-Forwarded-For", "198.51.100.7")]).0 == "bot_agent")

            // Without trusted proxies, a header names nobody: the peer is the client.
            let untrusting = try ServerProcess.start(extra: ["ADTALLY_BLOCKED_ADDRESSES_FILE": files.addresses.path])
            defer { untrusting.kill() }
            #expect(try Self.impression(on: untrusting, headers: [("X-Forwarded-For", "198.51.100.7")]).0 == nil)
        }

        @Test func aReloadReplacesTheListsWithoutFailingARequestAndABadFileIsKeptOut() throws {
            let files = try Self.files(agents: "SomeBot\n", addresses: "")
            let server = try ServerProcess.start(extra: ["ADTALLY_BOT_AGENTS_FILE": files.agents.path,
                                                         "ADTALLY_BLOCKED_ADDRESSES_FILE": files.addresses.path])
            defer { server.kill() }
            let (first, event) = try Self.impression(on: server, headers: [("User-Agent", "OtherBot/1")])
            #expect(first == nil)

            // Requests keep coming while the file changes and SIGHUP arrives.
            let failures = Mutex<[String]>([])
            let stop = Atomic<Bool>(false)
            let senders = DispatchGroup()
            for _ in 0..<2 {
                DispatchQueue.global().async(group: senders) {
                    while !stop.load(ordering: .relaxed) {
                        do {
                            let response = try server.request("GET", "/healthz")
                            let events = try server.postEvents(Body.event("impression", session: "nobody", ad: "ad-x"))
                            if response.status != 200 || events.status != 200 {
                                failures.withLock { $0.append("\(response.status) \(events.status)") }
                            }
                        } catch {
                            failures.withLock { $0.append("\(error)") }
                        }
                    }
                }
            }
            try "SomeBot\nOtherBot\n".write(to: files.agents, atomically: true, encoding: .utf8)
            server.child.send(SIGHUP)
            let reloaded = server.child.stdout.wait(until: Date() + 10) { $0.contains("traffic filters reloaded") ? true : nil }
            #expect(reloaded == true, "\(server.child.stdout.text.suffix(1000))")
            #expect(try Self.impression(on: server, headers: [("User-Agent", "otherbot/2")]).0 == "bot_agent")

            // A bad file: the lists in force stay, and the error names the file and its line.
            try "192.0.2.0/24\nnot an address\n".write(to: files.addresses, atomically: true, encoding: .utf8)
            server.child.send(SIGHUP)
            let refused = server.child.stdout.wait(until: Date() + 10) { text in
                text.split(separator: "\n").first { $0.contains("traffic filters not reloaded") }.map(String.init)
            }
            #expect(refused?.contains("\(files.addresses.path) line 2") == true, "\(refused ?? "no line")")
            #expect(try Self.impression(on: server, headers: [("User-Agent", "otherbot/2")]).0 == "bot_agent")
            stop.store(true, ordering: .relaxed)
            #expect(senders.wait(timeout: .now() + 30) == .success)
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(5))")

            // A replay of the first event keeps its first answer, though its agent is a bot now.
            let replay = try EventsAnswer(try server.request("POST", "/v1/events", headers: [Body.jsonType, ("User-Agent", "OtherBot/1")],
                                                             body: Body.json(event)))
            #expect(replay.statuses == ["accepted"])
        }

        @Test func aBadFileStopsTheStartNamingTheFileAndLine() throws {
            let files = try Self.files(agents: "ok\n", addresses: "10.0.0.0/8\n\n# fine\n10.0.0.0/33\n")
            let child = try ChildProcess(arguments: ["serve"], environment: ChildProcess.environment([
                "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "PORT": "0",
                "ADTALLY_BLOCKED_ADDRESSES_FILE": files.addresses.path,
            ]))
            let status = child.wait(timeout: 30)
            #expect(status != nil && status != 0)
            let lines = child.stderr.text.split(separator: "\n")
            #expect(lines.count == 1, "\(child.stderr.text)")
            #expect(child.stderr.text.contains("ADTALLY_BLOCKED_ADDRESSES_FILE") && child.stderr.text.contains("\(files.addresses.path) line 4"))
            let missing = try ChildProcess(arguments: ["serve"], environment: ChildProcess.environment([
                "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "PORT": "0", "ADTALLY_BOT_AGENTS_FILE": "/nonexistent/agents.txt",
            ]))
            #expect(missing.wait(timeout: 30) != 0)
            #expect(missing.stderr.text.contains("ADTALLY_BOT_AGENTS_FILE names /nonexistent/agents.txt, which cannot be read"))
        }
    }
}
