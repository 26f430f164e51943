import Foundation

/// Renders summary rows as a fixed-width table (for a terminal or a log) or as JSON lines.
///
/// ```swift
/// let table = SummaryTable(width: 100, colors: false)
/// print(table.render(SummaryOrder.worst.sorted(summary.rows()), counts: summary.counts), terminator: "")
/// ```
///
/// Every line of the table fits in `width` columns: with less room, the least important columns are
/// left out (sparkline, parse failures, p50, last status, errors, p95, in that order) and the endpoint
/// is shortened, its host first (a loopback host goes entirely), so the end of its path stays readable.
///
/// When a row's lines carry the `country` tag, the table has a COUNTRY column after the endpoint (rows
/// are then per endpoint and country; `-` for a row without one). The footer's request total is the sum
/// of the rows', whatever they were read from.
///
/// When a row has an objective (its interval points carry `objective_availability` or
/// `objective_latency`), the table shows per objective the objective, the budget used over the points
/// read and the burn rate over the last 5 minutes of them, and marks the endpoints burning fastest
/// (``BurnMark``); without objectives it has none of these columns. Narrow, the objectives go after the
/// parse failures, the budget used after errors, the burn rates and the mark last of all.
package struct SummaryTable: Sendable {
    package var width: Int
    package var colors: Bool
    /// Error % at or above which the cell is yellow, and red.
    package static let errorPercentWarning = 1.0
    package static let errorPercentAlarm = 5.0
    /// p99 milliseconds at or above which the cell is yellow, and red.
    package static let p99Warning = 500.0
    package static let p99Alarm = 1_000.0
    /// The narrowest table: method, a shortened endpoint, requests, error % and p99.
    package static let minimumWidth = 32
    /// Burn rates at or above which an endpoint is marked `!!` (the page alert's rate over 1 h) and `!`
    /// (its rate over 6 h): ``BurnMark``.
    package static let burnRatePage = 14.4
    package static let burnRateWarning = 6.0
    /// The burn-rate window's length in minutes, as the column titles show it.
    package static let burnWindowMinutes = SummaryAggregator.burnWindow / 60_000_000_000

    package init(width: Int, colors: Bool) {
        self.width = max(width, Self.minimumWidth)
        self.colors = colors
    }

    private enum Column: CaseIterable {
        case method, endpoint, country, requests, errors, errorPercent, p50, p95, p99
        case availabilityObjective, availabilityUsed, availabilityBurn, latencyObjective, latencyUsed, latencyBurn
        case burnMark, last, parse, sparkline

        var title: String {
            switch self {
            case .method: return "METHOD"
            case .endpoint: return "ENDPOINT"
            case .country: return "COUNTRY"
            case .requests: return "REQS"
            case .errors: return "ERRS"
            case .errorPercent: return "ERR%"
            case .p50: return "P50ms"
            case .p95: return "P95ms"
            case .p99: return "P99ms"
            case .last: return "LAST"
            case .parse: return "PARSE"
            case .sparkline: return "P95 OVER TIME"
            case .availabilityObjective: return "AVAIL"
            case .availabilityUsed: return "A.USED"
            case .availabilityBurn: return "A.BURN\(SummaryTable.burnWindowMinutes)m"
            case .latencyObjective: return "LATENCY"
            case .latencyUsed: return "L.USED"
            case .latencyBurn: return "L.BURN\(SummaryTable.burnWindowMinutes)m"
            case .burnMark: return "!"
            }
        }

        /// Left out first when the width is short: higher goes first.
        var dropOrder: Int? {
            switch self {
            case .sparkline: return 12
            case .parse: return 11
            case .latencyObjective: return 10
            case .availabilityObjective: return 9
            case .p50: return 8
            case .last: return 7
            case .errors: return 6
            case .latencyUsed: return 5
            case .availabilityUsed: return 4
            case .p95: return 3
            case .latencyBurn: return 2
            case .availabilityBurn: return 1
            case .burnMark: return 0
            case .method, .endpoint, .country, .requests, .errorPercent, .p99: return nil
            }
        }

        var alignsRight: Bool {
            switch self {
            case .method, .endpoint, .country, .sparkline, .last, .burnMark: return false
            default: return true
            }
        }

        /// The objective columns: shown only when a row has that objective.
        static let availabilityColumns: [Column] = [.availabilityObjective, .availabilityUsed, .availabilityBurn]
        static let latencyColumns: [Column] = [.latencyObjective, .latencyUsed, .latencyBurn]
    }

    /// The shortest the endpoint column gets before columns are left out.
    private static let endpointMinimum = 16

    /// The table: a header, one line per row, and the footer. Ends with a line end.
    ///
    /// - Parameters:
    ///   - rows: The rows to show.
    ///   - counts: What was read besides the rows, for the footer.
    ///   - title: A line above the header.
    ///   - allRows: Every row when `rows` is only the first of them: the footer's totals are theirs.
    package func render(
        _ rows: [SummaryRow],
        counts: SummaryCounts,
        title: String? = nil,
        allRows: [SummaryRow]? = nil
    ) -> String {
        let cells = rows.map { row -> [Column: String] in
            [
                .method: Terminal.visible(row.method), .endpoint: Terminal.visible(row.endpoint),
                .country: row.country.map(Terminal.visible) ?? "-",
                .requests: String(row.requests), .errors: String(row.errors),
                .errorPercent: Self.percent(row.errorPercent, requests: row.requests),
                .p50: Self.percentile(row.p50, row), .p95: Self.percentile(row.p95, row),
                .p99: Self.percentile(row.p99, row),
                .last: row.lastStatus.map(Terminal.visible) ?? "-", .parse: String(row.parseFailures),
                .sparkline: Self.sparkline(row.p95OverTime),
                .availabilityObjective: row.availability.map { Self.objectivePercent($0.objective) } ?? "-",
                .availabilityUsed: Self.budget(row.availability?.budgetUsed),
                .availabilityBurn: Self.burnRate(row.availability?.burnRate),
                .latencyObjective: row.latency.map(Self.latencyObjective) ?? "-",
                .latencyUsed: Self.budget(row.latency?.budgetUsed),
                .latencyBurn: Self.burnRate(row.latency?.burnRate),
                .burnMark: row.burnMark?.rawValue ?? "",
            ]
        }
        let hasAvailability = rows.contains { $0.availability != nil }
        let hasLatency = rows.contains { $0.latency != nil }
        let hasCountry = (allRows ?? rows).contains { $0.country != nil }
        var widths: [Column: Int] = [:]
        for column in Column.allCases {
            widths[column] = cells.reduce(column.title.count) { max($0, $1[column]?.count ?? 0) }
        }
        widths[.sparkline] = max(SummaryAggregator.sparklineSlots, Column.sparkline.title.count)
        var shown = Column.allCases.filter { column in
            if Column.availabilityColumns.contains(column) { return hasAvailability }
            if Column.latencyColumns.contains(column) { return hasLatency }
            if column == .burnMark { return hasAvailability || hasLatency }
            if column == .country { return hasCountry }
            return true
        }
        func total(_ columns: [Column], endpoint: Int) -> Int {
            columns.reduce(0) { $0 + ($1 == .endpoint ? endpoint : widths[$1] ?? 0) } + 2 * (columns.count - 1)
        }
        let droppable = Column.allCases.compactMap { column in column.dropOrder.map { (column, $0) } }
            .sorted { $0.1 > $1.1 }.map(\.0)
        for column in droppable where total(shown, endpoint: Self.endpointMinimum) > width {
            shown.removeAll { $0 == column }
        }
        let endpointWidth = max(4, min(widths[.endpoint] ?? 0, width - total(shown, endpoint: 0)))
        widths[.endpoint] = endpointWidth

        var out = ""
        if let title { out += paint(Self.fit(Terminal.visible(title), width), .bold) + "\n" }
        out += paint(line(shown.map { ($0, $0.title) }, widths: widths), .boldUnderlined) + "\n"
        for (row, cell) in zip(rows, cells) {
            var cells = shown.map { ($0, cell[$0] ?? "") }
            if let index = cells.firstIndex(where: { $0.0 == .endpoint }) {
                cells[index].1 = Self.fitEndpoint(
                    host: Terminal.visible(row.host),
                    path: Terminal.visible(row.path),
                    endpointWidth
                )
            }
            out += line(cells, widths: widths, row: row) + "\n"
        }
        if rows.isEmpty { out += Self.fit("(no apihealth_request lines to summarise)", width) + "\n" }
        let every = allRows ?? rows
        let fromIntervals = every.filter { $0.source == .intervalPoints }.count
        for footer in Self.footer(
            counts,
            width: width,
            requests: every.reduce(0) { $0 + $1.requests },
            parseFailures: every.reduce(0) { $0 + $1.parseFailures },
            endpointsFromIntervals: fromIntervals,
            of: every.count,
            objectives: hasAvailability || hasLatency
        ) {
            out += paint(footer, .dim) + "\n"
        }
        return out
    }

    private func line(_ cells: [(Column, String)], widths: [Column: Int], row: SummaryRow? = nil) -> String {
        var parts: [String] = []
        for (column, text) in cells {
            let width = widths[column] ?? 0
            let fitted = column == .endpoint ? Self.fit(text, width) : text
            let padding = String(repeating: " ", count: max(0, width - fitted.count))
            var cell = column.alignsRight ? padding + fitted : fitted + padding
            if let row, colors { cell = highlight(cell, column: column, row: row) }
            parts.append(cell)
        }
        var joined = parts.joined(separator: "  ")
        while joined.last == " " { joined.removeLast() }
        return joined
    }

    private func highlight(_ cell: String, column: Column, row: SummaryRow) -> String {
        switch column {
        case .errorPercent:
            if row.errorPercent >= Self.errorPercentAlarm { return paint(cell, .boldRed) }
            if row.errorPercent >= Self.errorPercentWarning { return paint(cell, .yellow) }
        case .p99:
            if let p99 = row.p99, p99 >= Self.p99Alarm { return paint(cell, .boldRed) }
            if let p99 = row.p99, p99 >= Self.p99Warning { return paint(cell, .yellow) }
        case .availabilityBurn, .latencyBurn:
            let rate = column == .availabilityBurn ? row.availability?.burnRate : row.latency?.burnRate
            switch rate.flatMap(BurnMark.init(burnRate:)) {
            case .page: return paint(cell, .boldRed)
            case .warning: return paint(cell, .yellow)
            case nil: break
            }
        case .availabilityUsed, .latencyUsed:
            let used = column == .availabilityUsed ? row.availability?.budgetUsed : row.latency?.budgetUsed
            if let used, used >= 1 { return paint(cell, .boldRed) }
        case .burnMark:
            switch row.burnMark {
            case .page: return paint(cell, .boldRed)
            case .warning: return paint(cell, .yellow)
            case nil: break
            }
        case .sparkline: return paint(cell, .cyan)
        case .method: return paint(cell, .dim)
        default: break
        }
        return cell
    }

    private func paint(_ text: String, _ style: Terminal.Style) -> String {
        Terminal.paint(text, style, colors: colors)
    }

    /// An endpoint cut to `width` columns, its host shortened first (a loopback host, which says least,
    /// left out entirely), then its path cut from the front: `api.ex…/checkout/orders`, `…/checkout/orders`,
    /// `…kout/orders`.
    package static func fitEndpoint(host: String, path: String, _ width: Int) -> String {
        let hostCharacters = Array(host)
        let pathCharacters = Array(path)
        guard hostCharacters.count + pathCharacters.count > width else { return host + path }
        guard width > 1 else { return String(pathCharacters.suffix(width)) }
        let room = width - pathCharacters.count
        if room >= 2, !isLoopback(host) { return String(hostCharacters.prefix(room - 1)) + "…" + path }
        return "…" + String(pathCharacters.suffix(width - 1))
    }

    /// Whether `host` (with or without a port) names this machine: `127.x.x.x`, `localhost`, `[::1]`.
    static func isLoopback(_ host: String) -> Bool {
        let name: Substring
        if host.hasPrefix("[") {
            name = host.dropFirst().prefix { $0 != "]" }
        } else {
            name = host.prefix { $0 != ":" }
        }
        return name.hasPrefix("127.") || name.lowercased() == "localhost" || name == "::1"
    }

    /// `text` cut to `width` columns with an ellipsis after its first third.
    package static func fit(_ text: String, _ width: Int) -> String {
        let characters = Array(text)
        guard characters.count > width else { return text }
        guard width > 1 else { return String(characters.prefix(width)) }
        let head = (width - 1) / 3
        let tail = width - 1 - head
        return String(characters.prefix(head)) + "…" + String(characters.suffix(tail))
    }

    static func milliseconds(_ value: Double?) -> String {
        guard let value else { return "-" }
        if value < 10 { return String(format: "%.2f", value) }
        if value < 100 { return String(format: "%.1f", value) }
        if value < 100_000 { return String(format: "%.0f", value) }
        return String(format: "%.0fs", value / 1_000)
    }

    /// A percentile cell: `≤` before a bucket's upper bound (a row read from interval points).
    static func percentile(_ value: Double?, _ row: SummaryRow) -> String {
        guard let value, row.source == .intervalPoints else { return milliseconds(value) }
        return "≤" + milliseconds(value)
    }

    static func percent(_ value: Double, requests: Int) -> String {
        guard requests > 0 else { return "-" }
        if value == 0 || value == 100 { return String(format: "%.0f", value) }
        return String(format: "%.1f", value)
    }

    /// An objective as a percentage without trailing zeros: 0.999 is `99.9%`, 0.99 `99%`.
    static func objectivePercent(_ share: Double) -> String {
        var text = String(format: "%.4f", share * 100)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text + "%"
    }

    /// A latency objective: `99%≤300ms`.
    static func latencyObjective(_ objective: ObjectiveSummary) -> String {
        let threshold = objective.thresholdMilliseconds.map { "≤" + milliseconds($0) + "ms" } ?? ""
        return objectivePercent(objective.objective) + threshold
    }

    /// The budget used: below the whole budget as a percentage of it (`0%`, `2.5%`, `40%`), from the
    /// whole budget on as how many budgets (`1.0×`, `7.0×`, `67×`, `1000×`); `-` without requests.
    static func budget(_ used: Double?) -> String {
        guard let used, used.isFinite else { return "-" }
        // A share computed as 0.99999… from exact counts is the whole budget.
        let budgets = used * (1 + 1e-9)
        if budgets >= 1 { return String(format: budgets < 9.95 ? "%.1f×" : "%.0f×", used) }
        let percent = used * 100
        if percent == 0 { return "0%" }
        return String(format: percent < 9.95 ? "%.1f%%" : "%.0f%%", percent)
    }

    /// A burn rate: `0`, `0.04`, `2.5`, `14.4`; `-` without requests in the window.
    static func burnRate(_ rate: Double?) -> String {
        guard let rate, rate.isFinite else { return "-" }
        if rate == 0 { return "0" }
        return String(format: rate < 0.1 ? "%.2f" : "%.1f", rate)
    }

    static let blocks: [Character] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]

    /// One block per slot, scaled from zero to the row's highest p95; a space where there was no request.
    package static func sparkline(_ values: [Double?]) -> String {
        let highest = values.compactMap { $0 }.max() ?? 0
        return String(
            values.map { value -> Character in
                guard let value else { return " " }
                guard highest > 0 else { return blocks[0] }
                let level = Int((value / highest * Double(blocks.count)).rounded(.up)) - 1
                return blocks[min(max(level, 0), blocks.count - 1)]
            }
        )
    }

    /// What was read besides the rows, packed into lines of at most `width` columns.
    ///
    /// - Parameters:
    ///   - requests: The rows' requests, summed: the footer's total, so it always agrees with the rows
    ///     (raw request lines read, when they are fewer or more, are said apart); `nil`: the lines read.
    ///   - parseFailures: The rows' parse failures, summed; `nil`: the lines read.
    package static func footer(
        _ counts: SummaryCounts,
        width: Int,
        requests: Int? = nil,
        parseFailures: Int? = nil,
        endpointsFromIntervals: Int = 0,
        of endpoints: Int = 0,
        objectives: Bool = false
    ) -> [String] {
        let total = requests ?? counts.requestLines
        var items = [
            "\(counts.lines) lines", "\(total) requests",
            "\(parseFailures ?? counts.parseFailureLines) parse failures",
        ]
        if total != counts.requestLines { items.append("\(counts.requestLines) raw request lines read") }
        if counts.intervalLines > 0 { items.append("\(counts.intervalLines) interval points") }
        if endpointsFromIntervals > 0 {
            items.append(
                "\(endpointsFromIntervals) of \(endpoints) endpoints read from interval points (raw points sampled or off): exact counts, ≤ percentiles are bucket upper bounds"
            )
        } else if endpoints > 0 {
            items.append("read from raw points")
        }
        if objectives {
            items += [
                "A. availability, L. latency objective",
                "USED: budget spent over the points read (N× past it)",
                "BURN\(burnWindowMinutes)m: burn rate over their last \(burnWindowMinutes) min",
                "!! burn ≥ \(number(burnRatePage)), ! ≥ \(number(burnRateWarning))",
            ]
        }
        if counts.otherMeasurements > 0 { items.append("\(counts.otherMeasurements) other measurements") }
        if counts.filteredOut > 0 { items.append("\(counts.filteredOut) filtered out") }
        if counts.earlier > 0 { items.append("\(counts.earlier) from earlier runs") }
        var skipped = "skipped: \(counts.torn) torn, \(counts.corrupt) corrupt, \(counts.foreign) foreign"
        if counts.skippedEntries > 0 { skipped += ", \(counts.skippedEntries) entries not read" }
        items.append(skipped)
        var lines: [String] = []
        var current = ""
        for item in items {
            if current.isEmpty {
                current = item
            } else if current.count + 3 + item.count > width {
                lines.append(current)
                current = item
            } else {
                current += " · " + item
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines.map { fit($0, width) }
    }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// `text` quoted as the tables and `influx-tail`'s line format show a string: quotes, backslashes and control
    /// characters escaped, C1 controls too, so a spool line can never drive a terminal.
    package static func string(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                    result += String(format: "\\u%04x", scalar.value)
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
