import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The event export (API 1.4, section 11) cannot hold the server or the database, as listings
/// cannot (`ReportStreaming`): an HTTP/1.0 export of hundreds of thousands of events streams
/// close-delimited with flat memory, and an export its client does not read within
/// `ADTALLY_REPORT_MAX_SECONDS` is ended, its transaction gone from the database.
extension EndToEnd {
    @Suite(.timeLimit(.minutes(10))) struct EventExportStreaming {
        static let rows = 300_000

        /// `rows` events of one ad, 10 ms apart, received over the last hours (inside the default
        /// retention, so the export's bounds are after its horizon).
        static func populate(_ url: String, from: String) throws {
            _ = try Psql.value("""
                INSERT INTO events (session_id, event_id, type, ad_id, status, reason, occurred_at, received_at, snapshot_id, position)
                SELECT 's-' || (g % 1000), gen_random_uuid(), CASE WHEN g % 3 = 0 THEN 'click' ELSE 'impression' END, 'ad-big',
                       'accepted', NULL, t - interval '250 milliseconds', t, 'feed-' || (g % 1000), (g % 40)::int
                FROM generate_series(0, \(rows - 1)) AS g,
                     LATERAL (SELECT timestamptz '\(from)' + interval '1 hour' + g * interval '10 milliseconds') AS x(t);
                """, url)
        }

        static func request(_ version: String, range: String, token: String = ServerProcess.adminToken) -> [UInt8] {
            Array("GET /v1/reports/ads/ad-big/events?\(range) HTTP/\(version)\r\nHost: test\r\nAuthorization: Bearer \(token)\r\n\r\n".utf8)
        }

        @Test func anHTTP10ExportStreamsWithFlatMemoryAndASlowReaderIsEndedAtTheLimit() throws {
            let database = try TestDatabase.create(prefix: "e2e")
            let server = try ServerProcess.start(databaseURL: database.connectionString, extra: ["ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "0"])
            defer { server.kill() }
            // A second server on the same database whose exports must be read within 4 s.
            let strict = try ServerProcess.start(databaseURL: database.connectionString,
                                                 extra: ["ADTALLY_MAINTENANCE_INTERVAL_SECONDS": "0", "ADTALLY_REPORT_MAX_SECONDS": "4"])
            defer { strict.kill() }
            // A range of whole seconds six hours long, ending a minute ago.
            let end = (Int(Date().timeIntervalSince1970) - 60) / 60 * 60
            let formatter = ISO8601DateFormatter()
            let from = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(end - 6 * 3600)))
            let to = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(end)))
            try Self.populate(database.connectionString, from: from)
            let range = "from=\(from)&to=\(to)"
            let pid = server.child.process.processIdentifier

            // HTTP/1.0: read the whole body (it ends with the connection), sampling the server's memory.
            let fd = try Loopback.connect(port: server.port)
            defer { close(fd) }
            let request = Self.request("1.0", range: range)
            #expect(request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } == request.count)
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let before = ReportStreaming.rss(pid)
            var peak = before
            var head = Data()
            var bodyBytes = 0, newlines = 0, reads = 0
            var headDone = false
            var firstLine = Data()
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
                if firstLine.count < 400 { firstLine.append(contentsOf: chunk.prefix(400)) }
                bodyBytes += chunk.count
                newlines += chunk.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
                reads += 1
                if reads % 64 == 0 { peak = max(peak, ReportStreaming.rss(pid)) }
            }
            let headText = String(decoding: head, as: UTF8.self)
            #expect(headText.hasPrefix("HTTP/1.1 200"), "\(headText)")
            #expect(headText.lowercased().contains("content-type: application/x-ndjson"))
            #expect(headText.lowercased().contains("connection: close"))
            #expect(!headText.lowercased().contains("content-length"), "a close-delimited body has no Content-Length")
            #expect(!headText.lowercased().contains("transfer-encoding"))
            #expect(newlines == Self.rows, "\(newlines) lines, \(bodyBytes) bytes")
            #expect(bodyBytes > 60_000_000)
            let line = String(decoding: firstLine.prefix(while: { $0 != 0x0A }), as: UTF8.self)
            #expect(line.hasPrefix(#"{"event_id":""#) && line.contains(#""session_id":"s-0""#) && line.hasSuffix(#""credited_by":null}"#), "\(line)")
            // The body (over 60 MB) never sits in the server's memory whole.
            #expect(peak - before < 48 * 1024 * 1024, "the server's memory grew by \((peak - before) / 1_048_576) MB while streaming")

            // HTTP/1.1, read a little and then not at all: ended at the limit, its transaction gone.
            let slow = try Loopback.connect(port: strict.port)
            defer { close(slow) }
            let slowRequest = Self.request("1.1", range: range)
            let sentAt = Date()
            #expect(slowRequest.withUnsafeBytes { send(slow, $0.baseAddress, $0.count, 0) } == slowRequest.count)
            _ = setsockopt(slow, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let first = buffer.withUnsafeMutableBytes { recv(slow, $0.baseAddress, 4096, 0) }
            #expect(first > 0)
            #expect(String(decoding: buffer.prefix(max(first, 0)), as: UTF8.self).lowercased().contains("transfer-encoding: chunked"))
            func openTransactions() throws -> Int {
                Int(try Psql.value("""
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
                    """, database.connectionString)) ?? -1
            }
            Thread.sleep(forTimeInterval: 1)
            #expect(try openTransactions() >= 1, "the export's transaction is open while it streams")
            var gone = false
            for _ in 0..<120 {
                if try openTransactions() == 0 { gone = true; break }
                Thread.sleep(forTimeInterval: 0.25)
            }
            #expect(gone, "the slow export's transaction was still open 31 s after the request (limit 4 s)")
            // Ended by the export's own deadline, not by the server's 30 s write timeout, which
            // ends any response that makes no progress.
            let endedAfter = Date().timeIntervalSince(sentAt)
            #expect(endedAfter < 20, "the slow export ended \(Int(endedAfter)) s after the request (limit 4 s)")
            // The body was cut short: reading on ends at the close without the last chunk.
            var tail = Data()
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(slow, $0.baseAddress, $0.count, 0) }
                if count <= 0 { break }
                tail.append(contentsOf: buffer[0..<count])
                if tail.count > 200_000_000 { break }
            }
            #expect(!tail.suffix(7).elementsEqual(Array("\r\n0\r\n\r\n".utf8)), "the truncated body must not look complete")
            #expect(tail.count < 60_000_000, "the slow reader got the whole export: \(tail.count) more bytes")
        }
    }
}
