/// Prints one scenario's table from AdTally's reports: per client and ad, what AdTally received of
/// the counted type (sent), billed, counted as duplicate and rejected, with the reasons.
struct ReportTable {
    struct Row {
        let client: Scenario.Client
        let letter: String
        let advertiser: String
        let report: FeedBackend.AdReport
    }

    let scenario: Scenario
    let rows: [Row]

    func render() -> String {
        var cells: [[String]] = []
        for client in Scenario.Client.allCases {
            let mine = rows.filter { $0.client == client }
            for (index, row) in mine.enumerated() {
                cells.append(line(index == 0 ? client.rawValue : "", row.letter, row.advertiser, [row.report]))
            }
            cells.append(line("", "all", "", mine.map(\.report)))
        }
        let type = scenario.counts == .clicks ? "clicks" : "impressions"
        let width = max(9, cells.map { $0[5].count }.max() ?? 0)
        var lines = [pad("", 8) + pad("ad", 5) + pad("advertiser", 12) + lpad("sent", 5) + lpad("billed", 8)
                     + "  " + pad("duplicate", width + 2) + "rejected   (\(type))"]
        for cell in cells {
            lines.append(pad(cell[0], 8) + pad(cell[1], 5) + pad(cell[2], 12) + lpad(cell[3], 5) + lpad(cell[4], 8)
                         + "  " + pad(cell[5], width + 2) + cell[6])
        }
        return lines.joined(separator: "\n")
    }

    /// The cells of one line: client, ad, advertiser, sent, billed, duplicate, rejected.
    private func line(_ client: String, _ ad: String, _ advertiser: String, _ reports: [FeedBackend.AdReport]) -> [String] {
        let clicks = scenario.counts == .clicks
        let billed = reports.reduce(0) { $0 + (clicks ? $1.billed.clicks : $1.billed.impressions) }
        let duplicate = reports.reduce(0) { $0 + (clicks ? $1.duplicate.clicks : $1.duplicate.impressions) }
        let rejected = reports.reduce(0) { $0 + (clicks ? $1.rejected.clicks : $1.rejected.impressions) }
        let reasonsOfType: Set<String> = clicks
            ? ["click_within_window", "simultaneous_click", "ad_not_in_feed", "stale_snapshot", "position_mismatch"]
            : ["impression_already_counted", "ad_not_served", "not_viewable"]
        var duplicateText = "\(duplicate)"
        if reports.allSatisfy({ $0.duplicates != nil }) {
            duplicateText += reasons(reports.compactMap(\.duplicates), of: reasonsOfType)
        } else if duplicate > 0 {
            // An impression has one duplicate reason; clicks have two, told apart only by a newer server.
            duplicateText += clicks ? " (reasons not reported by this server)" : " (impression_already_counted \(duplicate))"
        }
        let rejectedText = "\(rejected)" + reasons(reports.map(\.rejections), of: reasonsOfType)
        return [client, ad, advertiser, "\(billed + duplicate + rejected)", "\(billed)", duplicateText, rejectedText]
    }

    private func reasons(_ maps: [[String: Int]], of kinds: Set<String>) -> String {
        var total: [String: Int] = [:]
        for map in maps { for (reason, count) in map where kinds.contains(reason) && count > 0 { total[reason, default: 0] += count } }
        guard !total.isEmpty else { return "" }
        return " (" + total.sorted { $0.key < $1.key }.map { entry in "\(entry.key) \(entry.value)" }.joined(separator: ", ") + ")"
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    private func lpad(_ text: String, _ width: Int) -> String {
        text.count >= width ? " " + text : String(repeating: " ", count: width - text.count) + text
    }
}
