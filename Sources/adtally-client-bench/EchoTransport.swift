import AdTallyClient
import Foundation

/// An in-process server that accepts every event at once: the tracker then runs as it does against
/// a fast server, its queue staying short, while the caller's thread is measured.
struct EchoTransport: EventTransport {
    func send(_ request: TransportRequest) async -> TransportResult {
        guard let body = request.body else {
            return .response(TransportResponse(status: 200, headers: [:], body: Data(#"{"status":"ok"}"#.utf8)))
        }
        let bytes = Array(body)
        let marker = Array(#""event_id":""#.utf8)
        var results: [String] = []
        var index = 0
        while index + marker.count + 36 <= bytes.count {
            if bytes[index] == marker[0], bytes[index..<(index + marker.count)].elementsEqual(marker) {
                let id = String(decoding: bytes[(index + marker.count)..<(index + marker.count + 36)], as: UTF8.self)
                results.append(#"{"event_id":"\#(id)","status":"accepted"}"#)
                index += marker.count + 36
            } else {
                index += 1
            }
        }
        let answer = #"{"accepted":\#(results.count),"duplicate":0,"rejected":0,"results":[\#(results.joined(separator: ","))]}"#
        return .response(TransportResponse(status: 200, headers: [:], body: Data(answer.utf8)))
    }
}
