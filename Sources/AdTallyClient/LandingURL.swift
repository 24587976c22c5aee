import Foundation

/// The ad's landing page with the click's id in it (API 1.5, "The click id"): the app opens the
/// ad's `url` with `adtally_click_id=<event_id>` added, the advertiser's site keeps the id until the
/// person converts, and the advertiser's server posts the conversion with it
/// (`POST /v1/conversions`), which AdTally attributes to that click.
///
/// The URL is made on its bytes, not through `URLComponents`, because the contract keeps the rest of
/// the URL byte for byte and `URLComponents` re-encodes what it parses (a `+`, a `%7E`, the
/// spelling of a host). The rules, after RFC 3986 (the first `#` starts the fragment, the first `?`
/// before it starts the query) and the WHATWG form encoding (fields split on `&` only):
///
/// - Scheme, user info, host (IPv6 literals included), port and path are kept as they are.
/// - No query: `?adtally_click_id=…` goes before the fragment, or at the end.
/// - A query: its fields are kept in order, with their own encoding, empty fields included. Every
///   field named `adtally_click_id` (the name compared after percent-decoding, so
///   `adtally%5Fclick%5Fid` is one too; case-sensitive, as servers read names) is a stale id: the
///   first is replaced in its place by the new one, and later ones are removed with their `&`.
///   Removing them matters: with two, many servers read the last, which would be the stale one.
/// - No such field: the new one is appended, after a `&` unless the query is empty (`https://x/?`)
///   or already ends with one (`?a=1&`).
/// - The fragment (`#…`) is kept after the query; a `?` inside it is part of it, not a query.
///
/// The input is not checked for being a URL: the server checked the ad's `url` when the feed was
/// registered (an absolute `https` URL of printable ASCII), and any string gets a defined answer.
public enum LandingURL {
    /// The query parameter that carries the click id.
    public static let clickIDParameter = "adtally_click_id"

    /// `adURL` with `adtally_click_id=<clickID>` (the id in lower case, as the server stores it).
    public static func adding(clickID: UUID, to adURL: String) -> String {
        let bytes = Array(adURL.utf8)
        var field = Array("\(clickIDParameter)=".utf8)
        EventEncoder.appendLowercaseUUID(clickID, to: &field)

        let fragmentStart = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        guard let queryMark = bytes[..<fragmentStart].firstIndex(of: UInt8(ascii: "?")) else {
            return String(decoding: bytes[..<fragmentStart] + [UInt8(ascii: "?")] + field + bytes[fragmentStart...],
                          as: UTF8.self)
        }
        let query = bytes[(queryMark + 1)..<fragmentStart]
        var fields: [ArraySlice<UInt8>] = []
        var replaced = false
        for existing in query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            guard isClickIDField(existing) else {
                fields.append(existing)
                continue
            }
            if !replaced { fields.append(field[...]) }
            replaced = true
        }
        var newQuery = Array(fields.joined(separator: [UInt8(ascii: "&")]))
        if !replaced {
            // `fields` joined is the query as it was; the new field goes after it.
            if let last = query.last, last != UInt8(ascii: "&") { newQuery.append(UInt8(ascii: "&")) }
            newQuery += field
        }
        return String(decoding: bytes[...queryMark] + newQuery + bytes[fragmentStart...], as: UTF8.self)
    }

    /// `adURL` with the click id, as a `URL`; `adURL` itself in the one case where the result would
    /// not parse (it does whenever `adURL.absoluteString` is a URL: only unreserved characters are
    /// added), so that the person still reaches the ad.
    public static func adding(clickID: UUID, to adURL: URL) -> URL {
        URL(string: adding(clickID: clickID, to: adURL.absoluteString)) ?? adURL
    }

    private static let parameterBytes = Array(clickIDParameter.utf8)

    /// Whether a query field's name (before its first `=`), percent-decoded, is `adtally_click_id`.
    private static func isClickIDField(_ field: ArraySlice<UInt8>) -> Bool {
        let name = field.prefix { $0 != UInt8(ascii: "=") }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(name.count)
        var index = name.startIndex
        while index < name.endIndex {
            if name[index] == UInt8(ascii: "%"), index + 2 < name.endIndex,
               let high = hexValue(name[index + 1]), let low = hexValue(name[index + 2]) {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(name[index])
                index += 1
            }
            if decoded.count > parameterBytes.count { return false }
        }
        return decoded == parameterBytes
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
