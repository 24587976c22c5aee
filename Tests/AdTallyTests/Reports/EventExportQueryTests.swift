@testable import AdTally
import HTTP
import Testing

/// The export's query reading (API.md section 11) and its encoders, without a database.
@Suite(.timeLimit(.minutes(3))) struct EventExportQueryTests {
    static func parameters(_ raw: String) -> QueryParameters { QueryParameters(decoding: Substring(raw))! }
    static let range = "from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z"

    @Test(arguments: [
        // (query, field); nil field: accepted.
        (range, nil),
        ("from=2026-11-01T00:00:00Z&to=2026-11-01T00:00:00Z", nil),                 // an empty range, as in the reports
        ("", "from"),                                                                // both required, from first
        ("to=2026-11-02T00:00:00Z", "from"),
        ("from=2026-11-01T00:00:00Z", "to"),
        ("from=&to=2026-11-02T00:00:00Z", "from"),                                   // an empty value is absent
        ("from=2026-11-01T00:00:00Z&to=", "to"),
        ("from=yesterday&to=2026-11-02T00:00:00Z", "from"),
        ("from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00", "to"),                  // no offset
        ("from=2026-11-01T00:00:00+05:30&to=2026-11-02T00:00:00Z", "from"),          // raw + decodes to a space
        ("from=2026-11-01T00:00:00%2B05:30&to=2026-11-02T00:00:00Z", nil),
        ("from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", "from"),               // from after to
        ("from=2026-11-01T00:00:00Z&to=2026-12-02T00:00:00Z", nil),                  // exactly 31 days
        ("from=2026-11-01T00:00:00Z&to=2026-12-02T00:00:00.000001Z", "to"),          // a microsecond more
        ("from=2026-01-01T00:00:00Z&to=2026-12-01T00:00:00Z", "to"),
        ("from=2026-11-01T00:00:00Z&from=2026-11-01T01:00:00Z&to=2026-11-02T00:00:00Z", "from"), // repeated
        ("from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z&to=2026-11-02T00:00:00Z", "to"),     // repeated, even if equal
        ("\(range)&status=accepted", nil),
        ("\(range)&status=duplicate", nil),
        ("\(range)&status=rejected", nil),
        ("\(range)&status=", nil),
        ("\(range)&status=Accepted", "status"),                                      // case-sensitive
        ("\(range)&status=billable", "status"),
        ("\(range)&status=accepted&status=rejected", "status"),
        ("\(range)&format=ndjson", nil),
        ("\(range)&format=csv", nil),
        ("\(range)&format=json", "format"),
        ("\(range)&format=CSV", "format"),
        ("\(range)&format=csv&format=csv", "format"),
        ("\(range)&tz=Asia/Kolkata&granularity=x&limit=5", nil),                     // not the export's: ignored
        ("from=bad&status=x&format=y", "from"),                                      // first in order wins
        ("status=x&format=y", "status"),                                             // single checks before the missing bounds
        ("format=y", "format"),
        ("from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z&status=x", "status"),
    ] as [(String, String?)])
    func validation(query: String, field: String?) {
        do {
            _ = try EventExportQuery.read(Self.parameters(query))
            #expect(field == nil, "\(query) was accepted, expected field \(field ?? "")")
        } catch {
            #expect(error.field == field, "\(query): \(error.message)")
            #expect(!error.message.isEmpty)
        }
    }

    @Test func valuesAndDefaults() throws {
        let plain = try EventExportQuery.read(Self.parameters(Self.range))
        #expect(plain == EventExportQuery(from: ReportFixture.time("2026-11-01T00:00:00Z"), to: ReportFixture.time("2026-11-02T00:00:00Z"),
                                          status: nil, format: .ndjson))
        let csv = try EventExportQuery.read(Self.parameters("from=2026-11-01T05:30:00.1234567%2B05:30&to=2026-11-02T00:00:00Z&status=rejected&format=csv"))
        // Compared to the microsecond, further digits truncated.
        #expect(csv.from == ReportFixture.time("2026-11-01T00:00:00.123456Z"))
        #expect(csv.status == .rejected)
        #expect(csv.format == .csv)
        #expect(EventExportEncoder(format: .ndjson).contentType == "application/x-ndjson")
        #expect(EventExportEncoder(format: .csv).contentType == "text/csv; charset=utf-8")
    }

    @Test func horizonRefusesEitherBoundBeforeIt() throws {
        let query = try EventExportQuery.read(Self.parameters(Self.range))
        let horizon = ReportFixture.time("2026-11-01T12:00:00Z")
        #expect(throws: ReportQuery.Invalid.self) { try query.checkHorizon(horizon) }
        do {
            try query.checkHorizon(horizon)
        } catch {
            #expect(error.field == "from")
            #expect(error.message.contains("2026-11-01T12:00:00.000Z"))
        }
        do {
            try query.checkHorizon(ReportFixture.time("2026-11-02T00:00:00.000001Z"))
        } catch {
            #expect(error.field == "from")     // both are before it: from first
        }
        // Exactly at the horizon is allowed, even off a quarter hour (raw rows answer it).
        try query.checkHorizon(ReportFixture.time("2026-11-01T00:00:00Z"))
        let late = try EventExportQuery.read(Self.parameters("from=2026-11-01T00:00:00.5Z&to=2026-11-02T00:00:00Z"))
        try late.checkHorizon(ReportFixture.time("2026-11-01T00:00:00.5Z"))
    }

    /// A row with every member, an anonymous row (an erased session's), and the escaping of both
    /// formats for a value that needs it (no identifier can hold one today; the encoders must not
    /// depend on that).
    @Test func encodersWriteEveryMemberInOrder() {
        let time = ReportFixture.time("2026-11-29T10:00:01.412999Z")
        let full = EventExportStore.Row(eventID: "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e", type: "click", sessionID: "s-1",
                                        occurredAt: ReportFixture.time("2026-11-29T10:00:01Z"), receivedAt: time, status: "rejected",
                                        reason: "click_limit_exceeded", snapshotID: "f-1", position: 3, creditedBy: nil)
        let anonymous = EventExportStore.Row(eventID: "00000000-0000-4000-8000-000000000000", type: "impression", sessionID: "#erased",
                                             occurredAt: time, receivedAt: time, status: "accepted", reason: nil, snapshotID: "f-9",
                                             position: 7, creditedBy: "review-1")
        let odd = EventExportStore.Row(eventID: "e", type: "click", sessionID: "a,\"b\"\n", occurredAt: time, receivedAt: time,
                                       status: "accepted", reason: nil, snapshotID: nil, position: 0, creditedBy: "x\u{1}")
        #expect(anonymous.eventID == nil && anonymous.sessionID == nil && anonymous.snapshotID == nil && anonymous.position == nil)
        #expect(anonymous.creditedBy == "review-1")
        let ndjson = EventExportEncoder(format: .ndjson)
        #expect(ndjson.opening().isEmpty)
        #expect(String(decoding: ndjson.encode([full, anonymous, odd]), as: UTF8.self) == """
            {"event_id":"5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e","type":"click","session_id":"s-1","occurred_at":"2026-11-29T10:00:01.000Z",\
            "received_at":"2026-11-29T10:00:01.412Z","status":"rejected","reason":"click_limit_exceeded","snapshot_id":"f-1","position":3,"credited_by":null}
            {"event_id":null,"type":"impression","session_id":null,"occurred_at":"2026-11-29T10:00:01.412Z",\
            "received_at":"2026-11-29T10:00:01.412Z","status":"accepted","reason":null,"snapshot_id":null,"position":null,"credited_by":"review-1"}
            {"event_id":"e","type":"click","session_id":"a,\\"b\\"\\n","occurred_at":"2026-11-29T10:00:01.412Z",\
            "received_at":"2026-11-29T10:00:01.412Z","status":"accepted","reason":null,"snapshot_id":null,"position":0,"credited_by":"x\\u0001"}

            """)
        let csv = EventExportEncoder(format: .csv)
        #expect(String(decoding: csv.opening(), as: UTF8.self)
                == "event_id,type,session_id,occurred_at,received_at,status,reason,snapshot_id,position,credited_by\r\n")
        #expect(String(decoding: csv.encode([full, anonymous, odd]), as: UTF8.self) ==
                "5f0c8a1e-7f3b-4a52-9d7e-0c1f2b3a4d5e,click,s-1,2026-11-29T10:00:01.000Z,2026-11-29T10:00:01.412Z,rejected,click_limit_exceeded,f-1,3,\r\n"
                + ",impression,,2026-11-29T10:00:01.412Z,2026-11-29T10:00:01.412Z,accepted,,,,review-1\r\n"
                + "e,click,\"a,\"\"b\"\"\n\",2026-11-29T10:00:01.412Z,2026-11-29T10:00:01.412Z,accepted,,,0,x\u{1}\r\n")
        #expect(csv.encode([]).isEmpty && ndjson.encode([]).isEmpty)
    }
}
