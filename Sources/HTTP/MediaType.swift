/// The media-type questions a JSON API asks of a request's headers, answered from the header text
/// alone (RFC 9110, 8.3 and 12.5.1).
public enum MediaType {
    /// Whether a `Content-Type` says JSON: `application/json` in any case, with a `charset`
    /// parameter only if it is `utf-8` (quoted or not); other parameters are allowed. Nil or
    /// anything else is not.
    public static func isJSON(contentType header: String?) -> Bool {
        guard let header else { return false }
        let parts = header.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingSpaces().lowercased() }
        guard parts.first == "application/json" else { return false }
        for parameter in parts.dropFirst() where !parameter.isEmpty {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
            guard pair.count == 2 else { return false }
            if pair[0] == "charset" {
                let value = pair[1].hasPrefix("\"") && pair[1].hasSuffix("\"") && pair[1].count >= 2
                    ? String(pair[1].dropFirst().dropLast()) : pair[1]
                guard value == "utf-8" else { return false }
            }
        }
        return true
    }

    /// Whether an `Accept` header prefers `text/csv` to JSON: CSV is listed with a quality above 0
    /// and at least that of `application/json` (or `application/*`, `*/*`).
    public static func prefersCSV(accept header: String) -> Bool {
        var csv: Double?
        var json: Double?
        for range in header.split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingSpaces().lowercased() }
            guard let type = parts.first, !type.isEmpty else { continue }
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
                if pair.count == 2, pair[0] == "q" { quality = Double(pair[1]) ?? 0 }
            }
            switch type {
            case "text/csv": csv = max(csv ?? 0, quality)
            case "application/json", "application/*", "*/*": json = max(json ?? 0, quality)
            default: break
            }
        }
        guard let csv, csv > 0 else { return false }
        return csv >= (json ?? 0)
    }
}
