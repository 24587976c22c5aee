import JSON
import Timestamps

/// Writes a listing (API.md section 3) piece by piece, so that it can be streamed: the opening, then
/// batches of rows, then the closing. JSON is `{"from","to","granularity","tz","final_before","rows":[…]}`;
/// CSV is RFC 4180 with a header row and CRLF line ends, `null` as an empty field, numbers and
/// `true`/`false` as in the JSON.
public struct ReportListingEncoder: Sendable {
    public let query: ReportQuery
    /// Every event received before it is in the counts (API.md section 3).
    public let finalBefore: Timestamp
    /// The zone's offsets, for `bucket_start`.
    let zone: ZoneRules
    private var rowsWritten = 0
    private var bucketTexts: [Int64: String] = [:]

    /// The CSV columns, in the contract's order: the ten of before 1.3, then (appended, so that a
    /// reader by position keeps working) `final`, one per rejection reason and one per duplicate
    /// reason.
    public static let csvColumns = ["ad_id", "advertiser_id", "bucket_start", "impressions", "clicks", "ctr",
                                    "duplicate_impressions", "rejected_impressions", "duplicate_clicks", "rejected_clicks", "final"]
        + CountColumn.rejectionReasons.map { "rejected_" + $0.rawValue } + CountColumn.duplicateReasons.map { "duplicate_" + $0.rawValue }

    init(query: ReportQuery, finalBefore: Timestamp, zone: ZoneRules = .utc) {
        self.query = query
        self.finalBefore = finalBefore
        self.zone = zone
    }

    /// `Content-Type` of the body.
    public var contentType: String {
        query.format == .csv ? "text/csv; charset=utf-8" : "application/json"
    }

    /// Everything before the first row.
    public func opening() -> [UInt8] {
        switch query.format {
        case .csv:
            return Array((Self.csvColumns.joined(separator: ",") + "\r\n").utf8)
        case .json:
            var writer = JSONWriter()
            writer.beginObject()
            writer.key("from"); writer.string(query.from?.rfc3339)
            writer.key("to"); writer.string(query.to?.rfc3339)
            writer.key("granularity"); writer.string(query.granularity.rawValue)
            writer.key("tz"); writer.string(query.tz.name)
            writer.key("final_before"); writer.string(finalBefore.rfc3339)
            writer.key("rows")
            return writer.bytes + Array("[".utf8)
        }
    }

    /// A batch of rows, continuing after the rows written before.
    public mutating func encode(_ rows: [ReportStore.Row]) -> [UInt8] {
        switch query.format {
        case .csv:
            var bytes: [UInt8] = []
            bytes.reserveCapacity(rows.count * 120)
            for row in rows { Self.appendCSV(row, bucketText: bucketText(row.bucketStart), to: &bytes) }
            rowsWritten += rows.count
            return bytes
        case .json:
            // One writer for the batch: it puts the commas between the batch's rows; a batch after
            // the first starts with the comma after the previous batch's last row.
            var writer = JSONWriter(reservingCapacity: rows.count * 640 + 1)
            for row in rows {
                writer.beginObject()
                writer.key("ad_id"); writer.string(row.adID)
                writer.key("advertiser_id"); writer.string(row.advertiserID)
                writer.key("bucket_start"); writer.string(bucketText(row.bucketStart))
                writer.key("final"); writer.bool(row.final)
                Self.writeCounts(row.counts, to: &writer)
                Self.writeReasons(row.values, to: &writer)
                writer.endObject()
            }
            defer { rowsWritten += rows.count }
            return rowsWritten > 0 && !rows.isEmpty ? [UInt8(ascii: ",")] + writer.bytes : writer.bytes
        }
    }

    /// A bucket's start as RFC 3339 text, formatted once per bucket: a listing's rows repeat the
    /// same few dozen buckets, ad after ad.
    /// With the zone's offset at that instant; `Z` when `tz` is UTC, as before 1.3.
    private mutating func bucketText(_ start: Int64?) -> String? {
        guard let key = start else { return nil }
        if let text = bucketTexts[key] { return text }
        if bucketTexts.count >= 4_096 { bucketTexts.removeAll(keepingCapacity: true) }
        let text = zone.rfc3339(key, utcAsZ: query.tz.isUTC)
        bucketTexts[key] = text
        return text
    }

    /// Everything after the last row.
    public func closing() -> [UInt8] {
        query.format == .csv ? [] : Array("]}".utf8)
    }

    /// The six counts and `ctr`, in the contract's member order (shared with the single-ad report).
    static func writeCounts(_ counts: ReportCounts, to writer: inout JSONWriter) {
        writer.key("impressions"); writer.int(counts.impressions)
        writer.key("clicks"); writer.int(counts.clicks)
        writer.key("ctr")
        if let ctr = counts.ctr { writer.double(ctr) } else { writer.null() }
        writer.key("duplicate_impressions"); writer.int(counts.duplicateImpressions)
        writer.key("rejected_impressions"); writer.int(counts.rejectedImpressions)
        writer.key("duplicate_clicks"); writer.int(counts.duplicateClicks)
        writer.key("rejected_clicks"); writer.int(counts.rejectedClicks)
    }

    /// `rejections` and `duplicates`, every reason in the contract's order, zeros included.
    static func writeReasons(_ values: CountValues, to writer: inout JSONWriter) {
        writer.key("rejections")
        writer.beginObject()
        for (reason, count) in zip(CountColumn.rejectionReasons, values.rejections) {
            writer.key(reason.rawValue); writer.int(count)
        }
        writer.endObject()
        writer.key("duplicates")
        writer.beginObject()
        for (reason, count) in zip(CountColumn.duplicateReasons, values.duplicates) {
            writer.key(reason.rawValue); writer.int(count)
        }
        writer.endObject()
    }

    static func appendCSV(_ row: ReportStore.Row, bucketText: String?, to bytes: inout [UInt8]) {
        let c = row.counts
        let ctr: String? = c.ctr.map { var w = JSONWriter(reservingCapacity: 16); w.double($0); return String(decoding: w.bytes, as: UTF8.self) }
        let fields: [String?] = [row.adID, row.advertiserID, bucketText, String(c.impressions), String(c.clicks), ctr,
                                 String(c.duplicateImpressions), String(c.rejectedImpressions), String(c.duplicateClicks), String(c.rejectedClicks),
                                 row.final ? "true" : "false"]
            + row.values.rejections.map { String($0) } + row.values.duplicates.map { String($0) }
        appendCSVLine(fields, to: &bytes)
    }

    /// One CSV line of `fields` (nil: an empty field), ended by CRLF: every CSV body's line.
    static func appendCSVLine(_ fields: [String?], to bytes: inout [UInt8]) {
        for (index, field) in fields.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            if let field { appendCSVField(field, to: &bytes) }
        }
        bytes.append(contentsOf: [0x0D, 0x0A])
    }

    /// RFC 4180: a field with a comma, a double quote, CR or LF is enclosed in double quotes, with
    /// each double quote doubled. Identifiers cannot hold these today; the quoting keeps the output
    /// valid whatever a column holds.
    static func appendCSVField(_ field: String, to bytes: inout [UInt8]) {
        let needsQuotes = field.utf8.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 0x0D || $0 == 0x0A }
        guard needsQuotes else {
            bytes.append(contentsOf: field.utf8)
            return
        }
        bytes.append(UInt8(ascii: "\""))
        for byte in field.utf8 {
            if byte == UInt8(ascii: "\"") { bytes.append(byte) }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
