import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Reports that cannot hold the server or the primary (API 1.3): an HTTP/1.0 listing is streamed
/// close-delimited with flat memory however long it is, and a listing its client does not read
/// within `ADTALLY_REPORT_MAX_SECONDS` is ended, its transaction gone from the database.
extension EndToEnd {
    // Ten minutes: a million rows read on a machine loaded by other work (CI beside two busy
    // processes) take minutes.
    @Suite(.timeLimit(.minutes(10))) struct ReportStreaming {
        static let rows = 1_000_000
        static let range = "from=2026-01-01T00:00:00Z&to=2026-04-11T00:00:00Z"

        /// 1,000,000 daily rows (10,000 ads x 100 UTC days) written straight into the rollups, so
        /// that a daily listing has a million rows without ten million events.
        static func populate(_ url: String) throws {
            let counts = Array(repeating: "1", count: 18).joined(separator: ", ")
            _ = try Psql.value("""
                INSERT INTO ad_day_counts
                SELECT 'ad-' || lpad((g % 10000)::text, 5, '0'), 0, timestamptz '2026-01-01T00:00:00Z' + (g / 10000) * interval '1 day', \(counts)
                FROM generate_series(0, \(rows - 1)) AS g;
                UPDATE lifecycle_state SET folded_to = '2026-04-11T00:00:00Z', quarters_from = '-infinity', refining = false;
                UPDATE rollup_day_phases SET days_from = '2026-01-01T00:00:00Z', days_to = '2026-04-11T00:00:00Z' WHERE phase = 0;
                """, url)
        }

        /// The resident memory of a process, in bytes.
        static func rss(_ pid: Int32) -> Int {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                  let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }

        static func request(_ version: String, token: String = ServerProcess.adminToken) -> [UInt8] {
            Array("GET /v1/reports/ads?granularity=day&format=csv&\(range) HTTP/\(version)\r\nHost: test\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8)
        }

        @Test func anHTTP10ListingOfAMillionRowsStreamsWithFlatMemoryAndASlowReaderIsEndedAtTheLimit() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            let server = try ServerProcess.start(databaseURL: database.connectionString, extra: ["ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "0"])
            defer { server.kill() }
            // A second server on the same database whose listings must be read within 4 s.
            let strict = try ServerProcess.start(databaseURL: database.connectionString,
                                                 extra: ["ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "0", "ADTALLY_REPORT_MAX_SECONDS": "4"])
            defer { strict.kill() }
            try Self.populate(database.connectionString)
            let pid = server.child.process.processIdentifier

            // HTTP/1.0: read the whole body (it ends with the connection), sampling the server's memory.
            let fd = try Loopback.connect(port: server.port)
            defer { close(fd) }
            let request = Self.request("1.0")
            #expect(request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } == request.count)
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let before = Self.rss(pid)
            var peak = before
            var head = Data()
            var bodyBytes = 0, newlines = 0, reads = 0
            var headDone = false
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            let started = Date()
            while Date().timeIntervalSince(started) < 360 {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                var chunk = buffer[0..<count]
                if !headDone {
                    head.append(contentsOf: chunk)
                    guard let end = head.range(of: Data("\r\n\r\n".utf8)) else { continue }
                    headDone = true
                    chunk = ArraySlice(head[end.upperBound...])
                    head = head[..<end.lowerBound]
                }
                bodyBytes += chunk.count
                newlines += chunk.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
                reads += 1
                if reads % 64 == 0 { peak = max(peak, Self.rss(pid)) }
            }
            let headText = String(decoding: head, as: UTF8.self)
            #expect(headText.hasPrefix("HTTP/1.1 200"), "\(headText)")
            #expect(headText.lowercased().contains("connection: close"))
            #expect(!headText.lowercased().contains("content-length"), "a close-delimited body has no Content-Length")
            #expect(!headText.lowercased().contains("transfer-encoding"))
            #expect(newlines == Self.rows + 1, "\(newlines) lines, \(bodyBytes) bytes")
            #expect(bodyBytes > 50_000_000)
            // The body (over 50 MB) never sits in the server's memory whole.
            #expect(peak - before < 48 * 1024 * 1024, "the server's memory grew by \((peak - before) / 1_048_576) MB while streaming")

            // HTTP/1.1, read a little and then not at all: ended at the limit, its transaction gone.
            let slow = try Loopback.connect(port: strict.port)
            defer { close(slow) }
            let slowRequest = Self.request("1.1")
            #expect(slowRequest.withUnsafeBytes { send(slow, $0.baseAddress, $0.count, 0) } == slowRequest.count)
            _ = setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let first = buffer.withUnsafeMutableBytes { recv(slow, $0.baseAddress, 4096, 0) }
            #expect(first > 0)
            func openTransactions() throws -> Int {
                Int(try Psql.value("""
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
                    """, database.connectionString)) ?? -1
            }
            Thread.sleep(forTimeInterval: 1)
            #expect(try openTransactions() >= 1, "the listing's transaction is open while it streams")
            var gone = false
            for _ in 0..<120 {
                if try openTransactions() == 0 { gone = true; break }
                Thread.sleep(forTimeInterval: 0.25)
            }
            #expect(gone, "the slow listing's transaction was still open 31 s after the request (limit 4 s)")
            // The body was cut short: reading on ends at the close without the last chunk.
            var tail = Data()
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(slow, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                tail.append(contentsOf: buffer[0..<count])
                if tail.count > 200_000_000 { break }
            }
            #expect(!tail.suffix(7).elementsEqual(Array("\r\n0\r\n\r\n".utf8)), "the truncated body must not look complete")
        }
    }
}
