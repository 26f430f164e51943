import APIHealthSummary
import Foundation

/// `influx-tail --cache`, and the "What to cache" lines `--summary` ends with: the cache advice of the
/// interval points read (``CacheAdviceAggregator``, fed by the summary's aggregator, so `--where` and
/// `--measurement` filter it as they filter the summary).
extension SummaryCommand {
    /// The cache advice rows, the most waiting saved first, cut to `-n`.
    func selectedCacheRows(_ aggregator: SummaryAggregator) -> [CacheAdviceRow] {
        let ranked = aggregator.cacheAdvice.rows()
        return rows.map { Array(ranked.prefix($0)) } ?? ranked
    }

    /// The `--cache` table (the line saying the advice is off when no point carried cache fields), under
    /// `title` in bold when there is one, its rows cut to what `height` leaves room for.
    func cacheTable(_ aggregator: SummaryAggregator, title: String?, height: Int?, width: Int) -> String {
        let every = aggregator.cacheAdvice.rows()
        var shown = selectedCacheRows(aggregator)
        if let height {
            // Title, header, footer (up to three lines) and the cursor's last line stay on screen.
            let room = max(1, height - 6)
            if shown.count > room { shown = Array(shown.prefix(room)) }
        }
        let table = CacheAdviceTable(width: width, colors: colors)
        var out = ""
        if let title {
            out += Terminal.paint(SummaryTable.fit(Terminal.visible(title), table.width), .bold, colors: colors) + "\n"
        }
        return out + table.render(shown, counts: aggregator.cacheAdvice.counts, allRows: every)
    }

    /// The "What to cache" lines after a blank line, or nothing when no interval point carried cache fields.
    func whatToCache(_ aggregator: SummaryAggregator, width: Int) -> String {
        let section = CacheAdviceTable(width: width, colors: colors).section(aggregator.cacheAdvice.rows())
        return section.isEmpty ? "" : "\n" + section
    }
}
