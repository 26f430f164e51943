import APIHealth
import Foundation

/// Renders cache advice rows (``CacheAdviceAggregator``) as a fixed-width table, as the "What to cache"
/// lines that end `--summary`, or as JSON lines.
///
/// ```swift
/// let advice = summary.cacheAdvice
/// print(CacheAdviceTable(width: 120, colors: false).render(advice.rows(), counts: advice.counts), terminator: "")
/// ```
///
/// One row per endpoint, the most waiting saved first: the responses judged (JUDGED: `cache_judged`, what
/// the shares are of), the lifetime advised (TTL: the longest candidate whose stale share stays under
/// 1 %, with `private` when some responses were one user's, so only the client's own cache may keep
/// them), the share it would have served (HITS) and served changed (STALE), the waiting it would have
/// saved (SAVED) and per minute observed (SAVED/MIN), and what the responses' headers say today. Every
/// line fits in `width` columns: with less room the module, SAVED, JUDGED, STALE, the headers, SAVED/MIN
/// and the method are left out in that order, and the endpoint is shortened as ``SummaryTable`` shortens it.
/// Without rows (no interval point carried cache fields) the table is one line saying the advice is off
/// and how to turn it on.
package struct CacheAdviceTable: Sendable {
    package var width: Int
    package var colors: Bool
    /// Endpoints the "What to cache" section of `--summary` shows at most.
    package static let sectionRows = 3

    package init(width: Int, colors: Bool) {
        self.width = max(width, SummaryTable.minimumWidth)
        self.colors = colors
    }

    private enum Column: CaseIterable {
        case method, endpoint, module, judged, hits, stale, saved, lifetime, savedPerMinute, headers

        var title: String {
            switch self {
            case .method: return "METHOD"
            case .endpoint: return "ENDPOINT"
            case .module: return "MODULE"
            case .judged: return "JUDGED"
            case .hits: return "HITS"
            case .stale: return "STALE"
            case .saved: return "SAVED"
            case .lifetime: return "TTL"
            case .savedPerMinute: return "SAVED/MIN"
            case .headers: return "HEADERS SAY"
            }
        }

        var alignsRight: Bool {
            switch self {
            case .judged, .hits, .stale, .saved, .savedPerMinute: return true
            default: return false
            }
        }

        /// Left out, in this order, when the width is short.
        static let dropped: [Column] = [.module, .saved, .judged, .stale, .headers, .savedPerMinute, .method]
    }

    /// The shortest the endpoint column gets before columns are left out.
    private static let endpointMinimum = 16
    /// The columns the headers need for other columns to stay: fewer, and columns are left out.
    private static let headersWanted = 24
    /// The fewest columns the headers get (the endpoint takes its whole width first).
    private static let headersMinimum = 12

    /// The table: a header, one line per row and a footer, or the line saying cache advice is off when
    /// there are no rows in `allRows`. Ends with a line end.
    ///
    /// - Parameters:
    ///   - rows: The rows to show, in order.
    ///   - counts: What was read besides the rows, for the footer.
    ///   - allRows: Every row when `rows` is only the first of them (`-n`).
    package func render(
        _ rows: [CacheAdviceRow],
        counts: CacheAdviceCounts,
        allRows: [CacheAdviceRow]? = nil
    ) -> String {
        let every = allRows ?? rows
        guard !every.isEmpty else { return Self.wrap(Self.offMessage(counts), width).joined(separator: "\n") + "\n" }
        let cells = rows.map { row -> [Column: String] in
            [
                .method: Terminal.visible(row.endpoint.method),
                .endpoint: Terminal.visible(row.endpoint.host + row.endpoint.path),
                .module: row.endpoint.module.map(Terminal.visible) ?? "-",
                .judged: String(row.figures.judged),
                .hits: row.hitShare.map(Self.percent) ?? "-",
                .stale: row.staleShare.map(Self.percent) ?? "-",
                .saved: row.lifetimeSavedMilliseconds.map(Self.duration) ?? "-",
                .lifetime: Self.lifetime(row),
                .savedPerMinute: row.savedPerMinute.map(Self.duration) ?? "-",
                .headers: Self.headerNotes(row).isEmpty ? "-" : Self.headerNotes(row).joined(separator: "; "),
            ]
        }
        var widths: [Column: Int] = [:]
        for column in Column.allCases {
            widths[column] = cells.reduce(column.title.count) { max($0, $1[column]?.count ?? 0) }
        }
        var shown = Column.allCases
        func total(_ columns: [Column], endpoint: Int, headers: Int) -> Int {
            columns.reduce(0) { sum, column in
                sum + (column == .endpoint ? endpoint : column == .headers ? headers : widths[column] ?? 0)
            } + 2 * (columns.count - 1)
        }
        let headersNatural = widths[.headers] ?? 0
        let headersWanted = min(headersNatural, Self.headersWanted)
        for column in Column.dropped
        where total(shown, endpoint: Self.endpointMinimum, headers: headersWanted) > width {
            shown.removeAll { $0 == column }
        }
        let room = width - total(shown, endpoint: 0, headers: 0)
        let endpointNatural = widths[.endpoint] ?? 0
        if shown.contains(.headers) {
            let endpointWidth = max(4, min(endpointNatural, room - min(headersNatural, Self.headersMinimum)))
            widths[.endpoint] = endpointWidth
            widths[.headers] = min(headersNatural, room - endpointWidth)
        } else {
            widths[.endpoint] = max(4, min(endpointNatural, room))
        }

        let titles = shown.map { ($0, Self.cut($0.title, widths[$0] ?? 0)) }
        var out = paint(line(titles, widths: widths), .boldUnderlined) + "\n"
        for (row, cell) in zip(rows, cells) {
            let values = shown.map { column -> (Column, String) in
                switch column {
                case .endpoint:
                    return (
                        column,
                        SummaryTable.fitEndpoint(
                            host: Terminal.visible(row.endpoint.host),
                            path: Terminal.visible(row.endpoint.path),
                            widths[.endpoint] ?? 0
                        )
                    )
                case .headers: return (column, Self.cut(cell[column] ?? "", widths[.headers] ?? 0))
                default: return (column, cell[column] ?? "")
                }
            }
            out += line(values, widths: widths, painted: true) + "\n"
        }
        for footer in Self.footer(counts, rows: every, width: width) { out += paint(footer, .dim) + "\n" }
        return out
    }

    private func line(_ cells: [(Column, String)], widths: [Column: Int], painted: Bool = false) -> String {
        var parts: [String] = []
        for (column, text) in cells {
            let width = widths[column] ?? 0
            let padding = String(repeating: " ", count: max(0, width - text.count))
            var cell = column.alignsRight ? padding + text : text + padding
            if painted, column == .lifetime { cell = paint(cell, .cyan) }
            if painted, column == .method { cell = paint(cell, .dim) }
            parts.append(cell)
        }
        var joined = parts.joined(separator: "  ")
        while joined.last == " " { joined.removeLast() }
        return joined
    }

    private func paint(_ text: String, _ style: Terminal.Style) -> String {
        Terminal.paint(text, style, colors: colors)
    }

    /// The footer: endpoints and points read, the time observed, what the columns mean; packed into lines
    /// of at most `width` columns.
    static func footer(_ counts: CacheAdviceCounts, rows: [CacheAdviceRow], width: Int) -> [String] {
        var items = ["\(rows.count) endpoint\(rows.count == 1 ? "" : "s")"]
        if counts.pointsWithCacheFields == counts.intervalPoints {
            items.append("\(counts.intervalPoints) interval points")
        } else {
            items.append(
                "\(counts.pointsWithCacheFields) of \(counts.intervalPoints) interval points with cache fields"
            )
        }
        if counts.pointsFilteredOut > 0 { items.append("\(counts.pointsFilteredOut) filtered out") }
        if counts.endpointsWithoutCacheFields > 0 {
            let count = counts.endpointsWithoutCacheFields
            items.append("\(count) endpoint\(count == 1 ? "" : "s") without cache fields not shown")
        }
        if let observed = counts.observedNanoseconds {
            let interval =
                counts.intervalNanoseconds % 1_000_000_000 == 0
                ? seconds(counts.intervalNanoseconds / 1_000_000_000)
                : duration(Double(counts.intervalNanoseconds) / 1e6)
            items.append(
                "observed \(duration(Double(observed) / 1e6)) (first to last point + one \(interval) interval)"
            )
        }
        items += [
            "JUDGED: responses a cache could keep, read to their end, not in flight beside a duplicate",
            "TTL: the longest max-age serving under 1 % changed bodies (private: per-user responses, "
                + "the client's own cache only)",
            "HITS/STALE: what a cache with that max-age would have served unchanged/changed",
            "SAVED: the waiting of its hits",
            "SAVED/MIN: per minute observed",
        ]
        var lines: [String] = []
        var current = ""
        for item in items {
            if item.count > width {
                if !current.isEmpty { lines.append(current) }
                lines += wrap(item, width)
                current = ""
            } else if current.isEmpty {
                current = item
            } else if current.count + 3 + item.count > width {
                lines.append(current)
                current = item
            } else {
                current += " · " + item
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }

    /// The line saying cache advice is off and how to turn it on: no interval point read carried a
    /// `cache_*` field (or, when filters left out every point that did, that none matches).
    package static func offMessage(_ counts: CacheAdviceCounts) -> String {
        if counts.pointsFilteredOut > 0 {
            let points = counts.pointsFilteredOut
            return
                "no cache advice matches the filters (\(points) interval point\(points == 1 ? "" : "s") with cache fields left out)"
        }
        let read = counts.intervalPoints == 0 ? "no interval points read" : "no interval point has cache_* fields"
        return "cache advice is off: \(read) (set APIHEALTH_CACHE_ADVICE=1 or capture.cacheAdvice = true)"
    }

    // MARK: - The "What to cache" section

    /// The "What to cache" lines `--summary` ends with: a title and one advice line per endpoint a simulated
    /// cache would have served something of, the `limit` that saved most (``advice(_:)``), each cut to the
    /// width; the title alone saying nothing would have been served when no row has hits; empty without
    /// rows (no cache fields read). Ends with a line end unless empty.
    ///
    /// ```swift
    /// let section = CacheAdviceTable(width: 120, colors: false).section(summary.cacheAdvice.rows())
    /// ```
    package func section(_ rows: [CacheAdviceRow], limit: Int = CacheAdviceTable.sectionRows) -> String {
        guard !rows.isEmpty else { return "" }
        let served = rows.filter { $0.lifetime != .nothingServed || $0.figures.coalescable > 0 }
        guard !served.isEmpty else {
            let judged = rows.reduce(0) { $0 + $1.figures.judged }
            return paint(
                Self.cut("What to cache: no cache would have served any of \(judged) responses judged", width),
                .bold
            ) + "\n"
        }
        var out =
            paint(Self.cut("What to cache (most waiting saved first; influx-tail --cache for all)", width), .bold)
            + "\n"
        for row in served.prefix(max(0, limit)) {
            let endpoint =
                Terminal.visible(row.endpoint.method) + " "
                + Terminal.visible(row.endpoint.host + row.endpoint.path)
            out += Self.cut(endpoint + ": " + Self.advice(row), width) + "\n"
        }
        if served.count > limit {
            out += paint(Self.cut("… and \(served.count - max(0, limit)) more", width), .dim) + "\n"
        }
        return out
    }

    /// One endpoint's advice as a sentence: the lifetime advised, what it would have served unchanged and
    /// changed, what it would have saved per minute, for which cache, and what the headers say: `a 60 s
    /// max-age would have served 48 % (0 % changed) of 25 responses judged, saving 1.9 s of waiting per
    /// minute; headers: no lifetime stated`.
    package static func advice(_ row: CacheAdviceRow) -> String {
        var sentence: String
        switch row.lifetime {
        case .nothingServed:
            sentence = "no max-age up to 1 h would have served any of \(row.figures.judged) responses judged"
        case .tooStale:
            let shortest = row.figures.hits.indices.first { row.figures.hits[$0] > 0 } ?? 0
            sentence =
                "every max-age that would have served some would also have served changed bodies "
                + "(\(percent(row.shareOfJudged(row.figures.stale[shortest]))) at "
                + "\(seconds(PointSchema.IntervalField.cacheAgeBounds[shortest])))"
        case .seconds(let bound):
            sentence =
                "a \(seconds(bound)) max-age would have served \(percent(row.hitShare ?? 0)) "
                + "(\(percent(row.staleShare ?? 0)) changed) of \(row.figures.judged) responses judged"
            if let perMinute = row.savedPerMinute {
                sentence += ", saving \(duration(perMinute)) of waiting per minute"
            } else if let saved = row.lifetimeSavedMilliseconds {
                sentence += ", saving \(duration(saved)) of waiting"
            }
            sentence +=
                row.sharedCacheAllowed
                ? "" : "; in the client's own cache only (Cache-Control: private): some responses are one user's"
        }
        if row.figures.coalescable > 0 {
            sentence +=
                "; \(row.figures.coalescable) requested while the same was in flight "
                + "(coalescing would save \(duration(row.figures.coalescableMilliseconds)))"
        }
        let notes = headerNotes(row)
        if !notes.isEmpty { sentence += "; headers: " + notes.joined(separator: ", ") }
        return sentence
    }

    /// What the responses' headers say, over every request of the endpoint: `no-store on 90 %`, `no
    /// lifetime stated` (storable, none with one), `max-age/Expires on 40 %`, `per-user on 100 %`,
    /// `revalidated (304) 12`, `served locally 3`, each only when it applies.
    package static func headerNotes(_ row: CacheAdviceRow) -> [String] {
        let figures = row.figures
        func share(_ count: Int) -> String {
            percent(figures.requests > 0 ? Double(count) / Double(figures.requests) : 0)
        }
        var notes: [String] = []
        if figures.noStore > 0 { notes.append("no-store on \(share(figures.noStore))") }
        if figures.storable > 0 && figures.withLifetime == 0 { notes.append("no lifetime stated") }
        if figures.withLifetime > 0 { notes.append("max-age/Expires on \(share(figures.withLifetime))") }
        if figures.privateOnly > 0 { notes.append("per-user on \(share(figures.privateOnly))") }
        if figures.revalidated > 0 { notes.append("revalidated (304) \(figures.revalidated)") }
        if figures.servedLocally > 0 { notes.append("served locally \(figures.servedLocally)") }
        return notes
    }

    /// A lifetime cell: `60 s`, `5 min private`, `too stale`; `-` when nothing would have been served.
    package static func lifetime(_ row: CacheAdviceRow) -> String {
        switch row.lifetime {
        case .nothingServed: return "-"
        case .seconds(let bound): return seconds(bound) + (row.sharedCacheAllowed ? "" : " private")
        case .tooStale: return "too stale"
        }
    }

    /// A bound in seconds as people say it: `1 s`, `60 s`, `5 min`, `1 h`.
    package static func seconds(_ value: Int64) -> String {
        if value <= 60 { return "\(value) s" }
        if value % 3_600 == 0 { return "\(value / 3_600) h" }
        if value % 60 == 0 { return "\(value / 60) min" }
        return "\(value) s"
    }

    /// A share as a whole percentage: `72 %`; `<1 %` and `>99 %` rather than a rounded 0 or 100.
    package static func percent(_ share: Double) -> String {
        guard share > 0 else { return "0 %" }
        guard share < 1 else { return "100 %" }
        let percent = share * 100
        if percent < 0.5 { return "<1 %" }
        if percent >= 99.5 { return ">99 %" }
        return "\(Int(percent.rounded())) %"
    }

    /// Milliseconds of waiting: `0.4 ms`, `850 ms`, `1.9 s`, `2.5 min`, `1.2 h`.
    package static func duration(_ milliseconds: Double) -> String {
        guard milliseconds.isFinite, milliseconds > 0 else { return "0 ms" }
        if milliseconds < 9.95 { return String(format: "%.1f ms", milliseconds) }
        if milliseconds < 999.5 { return String(format: "%.0f ms", milliseconds) }
        if milliseconds < 59_950 { return String(format: "%.1f s", milliseconds / 1_000) }
        if milliseconds < 3_597_000 { return String(format: "%.1f min", milliseconds / 60_000) }
        return String(format: "%.1f h", milliseconds / 3_600_000)
    }

    /// `text` cut to `width` columns, an ellipsis at its end.
    static func cut(_ text: String, _ width: Int) -> String {
        guard text.count > width else { return text }
        guard width > 1 else { return String(text.prefix(max(0, width))) }
        return String(text.prefix(width - 1)) + "…"
    }

    /// `text` broken at spaces into lines of at most `width` columns (a word longer than that is cut).
    static func wrap(_ text: String, _ width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if current.isEmpty {
                current = String(word)
            } else if current.count + 1 + word.count > width {
                lines.append(current)
                current = String(word)
            } else {
                current += " " + word
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines.map { cut($0, width) }
    }

    // MARK: - JSON

    /// One JSON object per row, one per line: the endpoint, its sums (`requests`, `judged`, `hits_le_60`,
    /// `hits_ms_le_60`, `stale_le_60`, …, `private_only`, `coalescable`, `coalescable_ms`), the lifetime
    /// advised (`ttl_seconds`, `null` without one; `ttl`, as the table says it; `shared_cache`, whether a
    /// shared cache may follow it), its shares (`hit_share`, `stale_share`), the waiting it would have saved
    /// (`ttl_saved_ms`, `ttl_saved_ms_per_minute`), `observed_seconds`, the header sums and `headers`, the
    /// phrases of the table's last column.
    package static func json(_ rows: [CacheAdviceRow]) -> String {
        var out = ""
        for row in rows {
            let figures = row.figures
            var object = JSONObject()
                .adding("host", row.endpoint.host).adding("path", row.endpoint.path)
                .adding("method", row.endpoint.method).adding("module", row.endpoint.module)
                .adding("requests", figures.requests).adding("judged", figures.judged)
            for (index, bound) in PointSchema.IntervalField.cacheAgeBounds.enumerated() {
                object = object.adding("hits_le_\(bound)", figures.hits[index])
                    .adding("hits_ms_le_\(bound)", number(figures.hitsMilliseconds[index]))
                    .adding("stale_le_\(bound)", figures.stale[index])
            }
            var ttlSeconds: Int64?
            if case .seconds(let bound) = row.lifetime { ttlSeconds = bound }
            object = object.adding("ttl_seconds", ttlSeconds)
                .adding("ttl", row.lifetime == .nothingServed ? nil : lifetime(row))
                .adding("shared_cache", row.sharedCacheAllowed)
                .adding("hit_share", number(row.hitShare)).adding("stale_share", number(row.staleShare))
                .adding("ttl_saved_ms", number(row.lifetimeSavedMilliseconds))
                .adding("ttl_saved_ms_per_minute", number(row.savedPerMinute))
                .adding("observed_seconds", number(row.observedNanoseconds.map { Double($0) / 1e9 }))
                .adding("private_only", figures.privateOnly).adding("coalescable", figures.coalescable)
                .adding("coalescable_ms", number(figures.coalescableMilliseconds))
                .adding("storable", figures.storable).adding("no_store", figures.noStore)
                .adding("with_lifetime", figures.withLifetime).adding("revalidated", figures.revalidated)
                .adding("served_locally", figures.servedLocally)
                .adding("headers", headerNotes(row))
            out += JSONLines.line(object)
        }
        return out
    }

    /// A number to at most nine decimals (sums of float milliseconds).
    private static func number(_ value: Double?) -> JSONNumber { JSONNumber(value.map(SummaryTable.rounded)) }
}
