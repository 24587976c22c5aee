import JSON
import Timestamps

/// Writes the event export (API.md section 11) batch by batch, so that it can be streamed: NDJSON,
/// one JSON object a line (`\n` after each, no envelope), or CSV as the listing writes it (RFC
/// 4180, a header row, CRLF line ends, `null` as an empty field). Members and columns are in the
/// contract's order; times are UTC, `Z`, milliseconds.
public struct EventExportEncoder: Sendable {
    /// NDJSON or CSV, from the query's `format`.
    public let format: EventExportQuery.Format
    /// Whether sessions are named by `session_ref` (an advertiser's export) rather than `session_id`.
    public let sessionRefs: Bool

    /// The members of a line, and the CSV columns, in the contract's order.
    public static let columns = ["event_id", "type", "session_id", "occurred_at", "received_at", "status", "reason",
                                 "snapshot_id", "position", "credited_by"]

    /// An encoder for one export's body.
    public init(format: EventExportQuery.Format, sessionRefs: Bool = false) {
        self.format = format
        self.sessionRefs = sessionRefs
    }

    /// The members and columns of this export: `session_ref` in `session_id`'s place for an advertiser.
    public var columns: [String] {
        sessionRefs ? Self.columns.map { $0 == "session_id" ? "session_ref" : $0 } : Self.columns
    }

    /// `Content-Type` of the body.
    public var contentType: String {
        format == .csv ? "text/csv; charset=utf-8" : "application/x-ndjson"
    }

    /// Everything before the first row: the CSV header; nothing for NDJSON.
    public func opening() -> [UInt8] {
        format == .csv ? Array((columns.joined(separator: ",") + "\r\n").utf8) : []
    }

    /// A batch of rows, each a whole line.
    public func encode(_ rows: [EventExportStore.Row]) -> [UInt8] {
        switch format {
        case .ndjson:
            var writer = JSONWriter(reservingCapacity: rows.count * 300)
            for row in rows {
                writer.beginObject()
                writer.key("event_id"); writer.string(row.eventID)
                writer.key("type"); writer.string(row.type)
                if sessionRefs {
                    writer.key("session_ref"); writer.string(row.sessionRef)
                } else {
                    writer.key("session_id"); writer.string(row.sessionID)
                }
                writer.key("occurred_at"); writer.string(row.occurredAt.rfc3339)
                writer.key("received_at"); writer.string(row.receivedAt.rfc3339)
                writer.key("status"); writer.string(row.status)
                writer.key("reason"); writer.string(row.reason)
                writer.key("snapshot_id"); writer.string(row.snapshotID)
                writer.key("position")
                if let position = row.position { writer.int(position) } else { writer.null() }
                writer.key("credited_by"); writer.string(row.creditedBy)
                writer.endObject()
                writer.endLine()
            }
            return writer.bytes
        case .csv:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(rows.count * 200)
            for row in rows {
                let fields: [String?] = [row.eventID, row.type, sessionRefs ? row.sessionRef : row.sessionID, row.occurredAt.rfc3339, row.receivedAt.rfc3339,
                                         row.status, row.reason, row.snapshotID, row.position.map { String($0) }, row.creditedBy]
                ReportListingEncoder.appendCSVLine(fields, to: &bytes)
            }
            return bytes
        }
    }
}
