@testable import AdTally
import Contract
import Foundation
import JSON
import Postgres
import Runtime
import Testing
import Timestamps

/// The scoping differential (API.md section 13): over random traffic for three advertisers (ads,
/// events of every outcome, credits over several advertisers, an erased session), every report
/// endpoint in every format, asked with each advertiser's key, answers exactly what the admin
/// token answers restricted to that advertiser's ads (with `session_ref` for `session_id` and no
/// `snapshot_id` in the events export); and asking for another advertiser's ads or rows is `404`
/// or `403` with nothing of theirs in the body.
///
/// The restriction is computed here from the admin's whole answer (its rows' `advertiser_id`, the
/// ads' owners as the traffic made them), not by asking the server for one advertiser, so a
/// filter missing from any endpoint's query shows as a difference.
@Suite(.timeLimit(.minutes(8))) struct AdvertiserScopeTests {
    typealias F = StoreFixture
    static let advertisers = ["acme", "globex", "initech"]
    static let range = "from=2026-11-29T00:00:00Z&to=2026-12-01T00:00:00Z"

    /// The advertiser an ad is registered for in a feed (its name says whose it would be).
    static func advertiser(named ad: String) -> String {
        ad.split(separator: "-").first.map(String.init) ?? ""
    }

    /// Three ads per advertiser, eight sessions with feeds of four of them, impressions, clicks
    /// (on the right row, a wrong row, an ad not in the feed), repeats, and an ad never registered;
    /// credits by session (over several advertisers), by advertiser and by ad; one session erased.
    /// Returns every ad the events name and the owner of each ad a feed registered (an ad of no
    /// feed belongs to no advertiser, whatever its name says).
    static func traffic(_ f: KeyFixture, seed: UInt64) throws -> (ads: [String], owners: [String: String]) {
        var owners: [String: String] = [:]
        var random = EventsDecoderTests.Generator(state: seed)
        let s = f.store
        let ads = advertisers.flatMap { advertiser in (0..<3).map { "\(advertiser)-ad-\($0)" } }
        for n in 0..<8 {
            let session = "s-\(n)"
            let chosen = Array(ads.shuffled(using: &random).prefix(4))
            try s.feed(session, "feed-\(n)", chosen.enumerated().map { F.ad($1, Int32($0), advertiser: advertiser(named: $1)) })
            for ad in chosen { owners[ad] = advertiser(named: ad) }
            var batch: [EventInput] = []
            for _ in 0..<Int(8 + random.next() % 12) {
                let pick = random.next() % 8
                let ad = pick == 0 ? "ghost-ad" : pick == 1 ? ads[Int(random.next() % UInt64(ads.count))] : chosen[Int(random.next() % 4)]
                let position = Int32(chosen.firstIndex(of: ad) ?? 7) + (random.next() % 6 == 0 ? 1 : 0)
                let event = random.next() % 2 == 0
                    ? F.event(.impression, session, ad, occurredAt: s.clock.now())
                    : F.event(.click, session, ad, snapshot: "feed-\(n)", position: position, occurredAt: s.clock.now())
                batch.append(event)
                if random.next() % 5 == 0 { batch.append(event) }  // a replay: the same event id
            }
            _ = try s.send(batch)
            s.clock.advance(seconds: Double(600 + random.next() % 5_000))
        }
        let credits = AdjustmentStore(limit: .configured)
        let from = ReportFixture.time("2026-11-29T00:00:00Z"), to = ReportFixture.time("2026-12-01T00:00:00Z")
        let noHorizon = Timestamp(microsecondsSinceEpoch: .min)
        for request in [AdjustmentRequest(adjustmentID: "multi", reason: .sivt, from: from, to: to, sessionIDs: ["s-1", "s-2"]),
                        AdjustmentRequest(adjustmentID: "globex-dispute", reason: .advertiserDispute, from: from, to: to, advertiserID: "globex"),
                        AdjustmentRequest(adjustmentID: "one-ad", reason: .operatorError, from: from, to: to, adIDs: ["acme-ad-0", "initech-ad-2"])] {
            _ = try credits.make(request, horizon: noHorizon, on: f.connection)
        }
        _ = try ErasureStore(limit: .configured).erase("s-3", on: f.connection)
        return (ads + ["ghost-ad"], owners)
    }

    /// The `session_ref` the contract defines, computed here from the database's secret.
    static func sessionRef(_ f: KeyFixture, advertiser: String, session: String) throws -> String {
        let hex = try f.connection.query("SELECT encode(secret, 'hex') FROM adtally_secrets WHERE name = 'session_ref'").first?
            .decode(String.self, at: 0) ?? ""
        let key = try #require(SHA256.Digest(hex: hex)).bytes
        return String(HMACSHA256(key: key).code(Array(advertiser.utf8) + [0] + Array(session.utf8)).hex.prefix(16))
    }

    static func csvLines(_ response: ReportFixture.Response) -> [String] {
        response.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
    }

    /// Nothing of `others`' ads in a refusal: its error body alone, naming none of their ads.
    static func expectNothingOf(_ response: ReportFixture.Response, others: [String], _ what: String) {
        #expect(Set(response.json.objectValue.map { Array($0.keys) } ?? []) == ["error"], "\(what): \(response.text)")
        for ad in others where !what.contains(ad) { #expect(!response.text.contains(ad), "\(what) names \(ad)") }
        #expect(!response.text.contains("impressions") && !response.text.contains("rows"), "\(what): \(response.text)")
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func eachAdvertisersAnswerIsTheAdminsRestrictedToItsAds(seed: UInt64) async throws {
        let f = try KeyFixture()
        let (ads, owners) = try Self.traffic(f, seed: seed)
        #expect(ads.contains { owners[$0] == nil }, "an ad never registered is among those asked for")
        var keys: [String: String] = [:]
        for advertiser in Self.advertisers { keys[advertiser] = try await f.makeKey(advertiser).secret }
        var refs: [String: [String: String]] = [:]  // advertiser -> session -> ref
        var sawErased = false

        for advertiser in Self.advertisers {
            let key = try #require(keys[advertiser])
            let others = ads.filter { owners[$0] != advertiser }
            let other = Self.advertisers.first { $0 != advertiser } ?? ""

            // The single-ad report: its own ads as the admin sees them; any other ad, known or not, 404.
            for ad in ads {
                for query in ["", "?\(Self.range)", "?tz=Asia/Kolkata&\(Self.range)"] {
                    let target = "/v1/reports/ads/\(ad)\(query)"
                    let keyed = await f.get(target, key)
                    if owners[ad] == advertiser {
                        let admin = await f.get(target, KeyFixture.admin)
                        #expect(keyed.status == 200 && keyed.textWithoutFinalBefore == admin.textWithoutFinalBefore, "\(advertiser) \(target)")
                    } else {
                        #expect(keyed.status == 404 && keyed.errorCode == "not_found", "\(advertiser) \(target): \(keyed.status)")
                        Self.expectNothingOf(keyed, others: others, "\(advertiser) \(target)")
                    }
                }
            }

            // The listing and the credits listing (the dashboard's data too), every format and
            // granularity: the admin's rows of this advertiser, with or without advertiser_id.
            let listings = ["/v1/reports/ads?x=1", "/v1/reports/ads?granularity=day&\(Self.range)", "/v1/reports/ads?granularity=hour&\(Self.range)",
                            "/v1/reports/ads?granularity=month&tz=America/New_York", "/v1/reports/ads?granularity=day&tz=Asia/Kolkata&\(Self.range)",
                            "/v1/reports/credits?x=1", "/v1/reports/credits?\(Self.range)&tz=Europe/Paris"]
            for listing in listings {
                for format in ["json", "csv"] {
                    let target = "\(listing)&format=\(format)"
                    let admin = await f.get(target, KeyFixture.admin)
                    #expect(admin.status == 200)
                    for asked in [target, "\(target)&advertiser_id=\(advertiser)"] {
                        let keyed = await f.get(asked, key)
                        #expect(keyed.status == 200, "\(advertiser) \(asked): \(keyed.text)")
                        if format == "json" {
                            let expected = (admin.json["rows"]?.arrayValue ?? []).filter { $0["advertiser_id"]?.stringValue == advertiser }
                            #expect(keyed.json["rows"]?.arrayValue == expected, "\(advertiser) \(asked)")
                        } else {
                            let adminLines = Self.csvLines(admin), keyedLines = Self.csvLines(keyed)
                            let column = listing.hasPrefix("/v1/reports/credits") ? 4 : 1
                            let expected = adminLines.dropFirst().filter { $0.components(separatedBy: ",")[column] == advertiser }
                            #expect(keyedLines.first == adminLines.first && Array(keyedLines.dropFirst()) == expected, "\(advertiser) \(asked)")
                        }
                    }
                    let refused = await f.get("\(target)&advertiser_id=\(other)", key)
                    #expect(refused.status == 403 && refused.errorCode == "forbidden", "\(advertiser) asking for \(other)")
                    Self.expectNothingOf(refused, others: others, "\(advertiser) \(target) for \(other)")
                }
            }

            // The events behind a count: its own ads' rows as the admin's, sessions by
            // session_ref, no snapshot id; any other ad 404.
            for ad in ads {
                for query in ["?\(Self.range)", "?status=accepted&\(Self.range)", "?status=rejected&\(Self.range)"] {
                    for format in ["ndjson", "csv"] {
                        let target = "/v1/reports/ads/\(ad)/events\(query)&format=\(format)"
                        let keyed = await f.get(target, key)
                        guard owners[ad] == advertiser else {
                            #expect(keyed.status == 404 && keyed.errorCode == "not_found", "\(advertiser) \(target)")
                            Self.expectNothingOf(keyed, others: others, "\(advertiser) \(target)")
                            continue
                        }
                        let admin = await f.get(target, KeyFixture.admin)
                        #expect(keyed.status == 200 && admin.status == 200)
                        if format == "ndjson" {
                            let adminLines = admin.text.split(separator: "\n").map { (try? JSONParser.parse(Array($0.utf8))) ?? .null }
                            let keyedText = keyed.text.split(separator: "\n")
                            #expect(adminLines.count == keyedText.count, "\(advertiser) \(target)")
                            for (adminLine, keyedLine) in zip(adminLines, keyedText) {
                                var expected = adminLine.objectValue ?? [:]
                                let session = expected.removeValue(forKey: "session_id")?.stringValue
                                let ref = try session.map { try Self.sessionRef(f, advertiser: advertiser, session: $0) }
                                expected["session_ref"] = ref.map(JSONValue.string) ?? .null
                                expected["snapshot_id"] = .null
                                #expect((try? JSONParser.parse(Array(keyedLine.utf8))) == .object(expected), "\(advertiser) \(target)")
                                #expect(keyedLine.range(of: #"^\{"event_id":[^,]*,"type":"[a-z]+","session_ref":"#, options: .regularExpression) != nil)
                                if let session, let ref { refs[advertiser, default: [:]][session] = ref } else { sawErased = true }
                            }
                        } else {
                            let adminLines = Self.csvLines(admin), keyedLines = Self.csvLines(keyed)
                            #expect(keyedLines.first == adminLines.first?.replacingOccurrences(of: "session_id", with: "session_ref"))
                            let expected = try adminLines.dropFirst().map { line in
                                var fields = line.components(separatedBy: ",")
                                fields[2] = try fields[2].isEmpty ? "" : Self.sessionRef(f, advertiser: advertiser, session: fields[2])
                                fields[7] = ""
                                return fields.joined(separator: ",")
                            }
                            #expect(Array(keyedLines.dropFirst()) == expected, "\(advertiser) \(target)")
                        }
                    }
                }
            }
        }

        // session_ref: one per session for an advertiser, different sessions apart, and two
        // advertisers' refs of one session apart; an erased session's events have none.
        #expect(sawErased, "the erased session's events are exported with a null session_ref")
        for (_, bySession) in refs { #expect(Set(bySession.values).count == bySession.count) }
        for session in Set(refs.values.flatMap(\.keys)) {
            let ofSession = Self.advertisers.compactMap { refs[$0]?[session] }
            #expect(Set(ofSession).count == ofSession.count, "\(session): \(ofSession)")
        }
        #expect(refs.count == Self.advertisers.count)
    }
}
