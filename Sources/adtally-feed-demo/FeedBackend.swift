import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The simulator's admin side: it registers feeds as a feed backend does
/// (`PUT /v1/sessions/{id}/feed`) and reads AdTally's per-ad reports (`GET /v1/reports/ads/{ad_id}`),
/// with the admin token.
struct FeedBackend: Sendable {
    let baseURL: URL
    let token: String

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What AdTally's single-ad report says about one ad.
    struct AdReport: Sendable {
        let billed: (impressions: Int, clicks: Int)
        let duplicate: (impressions: Int, clicks: Int)
        let rejected: (impressions: Int, clicks: Int)
        let rejections: [String: Int]
        /// Nil when the server does not break duplicates down by reason yet.
        let duplicates: [String: Int]?
    }

    func register(session: String, snapshot: String, items: [FeedItem]) async throws {
        let ads: [[String: Any]] = items.enumerated().compactMap { row, item in
            guard let ad = item.ad else { return nil }
            return ["ad_id": ad.id, "position": row, "advertiser_id": ad.advertiser, "url": ad.url]
        }
        let body = try JSONSerialization.data(withJSONObject: ["snapshot_id": snapshot, "ads": ads])
        let (status, text) = try await request("PUT", "/v1/sessions/\(session)/feed", body: body)
        guard status == 201 || status == 200 else { throw Failure(description: "feed registration: \(status) \(text)") }
    }

    func report(ad: String) async throws -> AdReport {
        let (status, text) = try await request("GET", "/v1/reports/ads/\(ad)", body: nil)
        guard status == 200, let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw Failure(description: "report of \(ad): \(status) \(text)")
        }
        func int(_ key: String) -> Int { object[key] as? Int ?? 0 }
        return AdReport(billed: (int("impressions"), int("clicks")),
                        duplicate: (int("duplicate_impressions"), int("duplicate_clicks")),
                        rejected: (int("rejected_impressions"), int("rejected_clicks")),
                        rejections: object["rejections"] as? [String: Int] ?? [:],
                        duplicates: object["duplicates"] as? [String: Int])
    }

    private func request(_ method: String, _ path: String, body: Data?) async throws -> (Int, String) {
        var request = URLRequest(url: baseURL.appendingPathComponent(String(path.dropFirst())))
        request.httpMethod = method
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: request) { data, response, error in
                if let error { return continuation.resume(throwing: Failure(description: "\(method) \(path): \(error)")) }
                let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                continuation.resume(returning: (status, String(decoding: data ?? Data(), as: UTF8.self)))
            }.resume()
        }
    }
}
