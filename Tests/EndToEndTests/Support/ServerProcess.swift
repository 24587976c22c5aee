import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

struct ServerStartError: Error, CustomStringConvertible {
    let description: String
}

/// `adtally serve` on 127.0.0.1 and a port of the kernel's choosing, read from its "listening" log line.
/// `@unchecked Sendable`: every stored property is a `let`; the child process is `ChildProcess`.
final class ServerProcess: @unchecked Sendable {
    static let adminToken = "e2e-admin-token-0123456789"
    /// The click rules of API version 1, before the grace window, the tap rule, the impression a
    /// click needs and the session's click limit existed: what the tests written for those rules
    /// set explicitly.
    static let version1ClickRules = ["ADTALLY_CLICK_GRACE_SECONDS": "0", "ADTALLY_TAP_WINDOW_MS": "0",
                                     "ADTALLY_CLICK_NEEDS_IMPRESSION": "off", "ADTALLY_SESSION_CLICK_LIMIT": "0"]
    /// The rules of API version 1.2 (the grace window and the tap rule as configured), without the
    /// two click rules of 1.3: for tests written for 1.2 that click without impressions.
    static let withoutClickRulesOf1_3 = ["ADTALLY_CLICK_NEEDS_IMPRESSION": "off", "ADTALLY_SESSION_CLICK_LIMIT": "0"]

    let child: ChildProcess
    let port: Int
    let databaseURL: String

    private init(child: ChildProcess, port: Int, databaseURL: String) {
        self.child = child
        self.port = port
        self.databaseURL = databaseURL
    }

    /// Starts a server on a fresh database.
    static func start(adminToken: String? = ServerProcess.adminToken, extra: [String: String] = [:]) throws -> ServerProcess {
        try start(databaseURL: TestDatabase.create(prefix: "e2e").connectionString, adminToken: adminToken, extra: extra)
    }

    /// Starts a server on `databaseURL` and waits (at most `timeout`) until it listens.
    static func start(databaseURL: String, adminToken: String? = ServerProcess.adminToken,
                      extra: [String: String] = [:], timeout: TimeInterval = 30) throws -> ServerProcess {
        var variables = [
            "DATABASE_URL": databaseURL,
            "HOST": "127.0.0.1",
            "PORT": "0",
            "LOG_LEVEL": "info",
            "ADTALLY_MIGRATIONS_DIR": Paths.migrationsDirectory.path,
        ]
        if let adminToken { variables["ADTALLY_ADMIN_TOKEN"] = adminToken }
        for (key, value) in extra { variables[key] = value }
        let child = try ChildProcess(arguments: ["serve"], environment: ChildProcess.environment(variables))
        let port = child.stdout.wait(until: Date() + timeout) { text in
            text.split(separator: "\n").lazy.compactMap(Self.listeningPort).first
        }
        guard let port else {
            child.killAndReap()
            throw ServerStartError(description: "adtally did not log \"listening\" within \(timeout) s; stdout: \(child.stdout.text.suffix(2000)) stderr: \(child.stderr.text.suffix(2000))")
        }
        return ServerProcess(child: child, port: port, databaseURL: databaseURL)
    }

    /// The port of a `{"msg":"listening",...,"port":N}` line.
    static func listeningPort(_ line: Substring) -> Int? {
        guard line.contains("\"listening\""),
              let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              object["msg"] as? String == "listening",
              let port = object["port"] as? Int, port > 0 else { return nil }
        return port
    }

    /// SIGTERM, then waits at most `timeout` for the exit; returns its status (nil: still running,
    /// then killed).
    @discardableResult
    func stop(timeout: TimeInterval = 10) -> Int32? {
        child.send(SIGTERM)
        let status = child.wait(timeout: timeout)
        if status == nil { child.killAndReap() }
        return status
    }

    /// For failure paths (defer): SIGKILL if still running.
    func kill() { child.killAndReap() }

    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: Data? = nil) throws -> HTTPResponse {
        try HTTPClient.request(port: port, method: method, path: path, headers: headers, body: body)
    }
}
