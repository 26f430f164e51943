import APIHealth
import APIHealthSummary
import Foundation
import LineProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `influx-tail --summary` and `--cache`: one row per endpoint, printed once or redrawn every second with `-f`.
struct SummaryCommand {
    /// What the rows are: the endpoints' health (`--summary`) or their cache advice (`--cache`).
    enum View {
        case endpoints, cache
    }

    var directory: URL
    var follow: Bool
    var json: Bool
    var order: SummaryOrder
    var rows: Int?
    var width: Int?
    var colors: Bool
    var measurement: String?
    var tags: [(key: String, value: String)]
    var view = View.endpoints

    func run() throws {
        let waiter = follow ? SignalWaiter() : nil
        let reader = try InfluxTail.openReader(directory, waiting: follow) { waiter?.wait(seconds: 1) != .stop }
        var aggregator = SummaryAggregator(precision: reader.precision, measurement: measurement, tags: tags)
        var follower = SpoolFollower(reader: reader)
        let first = try poll(&follower, into: &aggregator, tornTails: !follow)
        if first.lines > 0 { InfluxTail.warnAboutUnknownTags(aggregator.unknownFilterKeys) }
        guard let waiter else {
            if json {
                Terminal.write(jsonLines(aggregator))
                if view == .cache, aggregator.cacheAdvice.rows().isEmpty {
                    let message = CacheAdviceTable.offMessage(aggregator.cacheAdvice.counts)
                    FileHandle.standardError.write(Data("influx-tail: \(message)\n".utf8))
                }
                if aggregator.counts.unusable > 0 || aggregator.counts.skippedEntries > 0 {
                    let footer = SummaryTable.footer(aggregator.counts, width: 200).joined(separator: " · ")
                    FileHandle.standardError.write(Data("influx-tail: \(footer)\n".utf8))
                }
            } else {
                Terminal.write(table(aggregator, title: nil, height: nil))
            }
            return
        }
        try followLoop(waiter: waiter, follower: &follower, aggregator: &aggregator, warned: first.lines > 0)
    }

    /// Reads what was added since the last poll into `aggregator`, one segment at a time.
    private func poll(
        _ follower: inout SpoolFollower,
        into aggregator: inout SummaryAggregator,
        tornTails: Bool
    ) throws
        -> (lines: Int, problems: Int)
    {
        var seen = (lines: 0, problems: 0)
        do {
            try follower.poll(reportingTornTails: tornTails) { segment in
                for problem in segment.problems { aggregator.count(problem) }
                for line in segment.lines { aggregator.add(line) }
                seen.lines += segment.lines.count
                seen.problems += segment.problems.count
            }
        } catch {
            throw TailFailure(message: "\(error)")
        }
        return seen
    }

    private func selected(_ aggregator: SummaryAggregator) -> [SummaryRow] {
        let sorted = order.sorted(aggregator.rows())
        return rows.map { Array(sorted.prefix($0)) } ?? sorted
    }

    /// The rows as JSON lines.
    private func jsonLines(_ aggregator: SummaryAggregator) -> String {
        switch view {
        case .endpoints: return SummaryTable.json(selected(aggregator), slotWidth: aggregator.timeAxis?.slotWidth)
        case .cache: return CacheAdviceTable.json(selectedCacheRows(aggregator))
        }
    }

    private func table(_ aggregator: SummaryAggregator, title: String?, height: Int?) -> String {
        let columns = width ?? Terminal.columns()
        if view == .cache { return cacheTable(aggregator, title: title, height: height, width: columns) }
        let every = aggregator.rows()
        var shown = selected(aggregator)
        let section = whatToCache(aggregator, width: columns)
        if let height {
            // Title, header, footer (up to three lines), the What to cache lines and the cursor's last line
            // stay on screen.
            let room = max(1, height - 6 - section.reduce(0) { $0 + ($1 == "\n" ? 1 : 0) })
            if shown.count > room { shown = Array(shown.prefix(room)) }
        }
        return SummaryTable(width: columns, colors: colors).render(
            shown,
            counts: aggregator.counts,
            title: title,
            allRows: every
        ) + section
    }

    private func title() -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        let order = view == .cache ? "most waiting saved" : "\(self.order.rawValue)"
        return "\(formatter.string(from: Date()))  \(directory.path)  (\(order) first; Ctrl-C to stop)"
    }

    /// Redraws every second (in place on a terminal; appended when something changed otherwise) until
    /// SIGINT or SIGTERM, then restores the terminal.
    private func followLoop(
        waiter: SignalWaiter,
        follower: inout SpoolFollower,
        aggregator: inout SummaryAggregator,
        warned: Bool
    ) throws {
        let screen = Terminal.isTerminal && !json ? LiveScreen() : nil
        var warned = warned
        func draw() {
            if json {
                Terminal.write(jsonLines(aggregator))
            } else if let screen {
                screen.draw(table(aggregator, title: title(), height: Terminal.rows))
            } else {
                Terminal.write(table(aggregator, title: title(), height: nil) + "\n")
            }
        }
        draw()
        defer { screen?.restore() }
        var next = ContinuousClock.now + .seconds(1)
        while true {
            let remaining = next - ContinuousClock.now
            switch waiter.wait(
                seconds: max(0, Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18)
            ) {
            case .stop:
                screen?.restore()
                if !json { Terminal.write(table(aggregator, title: nil, height: nil)) }
                return
            case .resize:
                if screen != nil { draw() }
                continue
            case .timeout:
                break
            }
            next = ContinuousClock.now + .seconds(1)
            let added = try poll(&follower, into: &aggregator, tornTails: false)
            if !warned && added.lines > 0 {
                InfluxTail.warnAboutUnknownTags(aggregator.unknownFilterKeys)
                warned = true
            }
            // On a terminal every second (the clock moves); elsewhere only what changed.
            if screen != nil || added.lines > 0 || added.problems > 0 { draw() }
        }
    }
}

/// Takes SIGINT, SIGTERM and SIGWINCH synchronously (blocked in every thread, waited for with a timeout),
/// so the follow loop can restore the terminal before it exits.
struct SignalWaiter {
    enum Event { case timeout, stop, resize }

    private static var signals: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGWINCH)
        return set
    }

    /// Blocks the signals in the calling thread and every thread it starts afterwards.
    static func blockSignals() {
        var set = signals
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits up to `seconds` for one of the signals.
    func wait(seconds: Double) -> Event {
        var set = Self.signals
        let whole = max(0, seconds.rounded(.down))
        var timeout = timespec(tv_sec: Int(whole), tv_nsec: Int((seconds - whole) * 1e9))
        let received = sigtimedwait(&set, nil, &timeout)
        switch received {
        case SIGINT, SIGTERM: return .stop
        case SIGWINCH: return .resize
        default: return .timeout
        }
    }
}

/// The alternate screen with the cursor hidden while the summary redraws in place.
final class LiveScreen {
    private var active = true

    init() {
        Terminal.write("\u{1B}[?1049h\u{1B}[?25l")
    }

    /// Draws `text` from the top left, clearing what the last frame left to the right and below.
    func draw(_ text: String) {
        guard active else { return }
        var frame = "\u{1B}[H"
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        frame += lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n")
        frame += "\u{1B}[J"
        Terminal.write(frame)
    }

    /// Leaves the alternate screen and shows the cursor again (once).
    func restore() {
        guard active else { return }
        active = false
        Terminal.write("\u{1B}[?25h\u{1B}[?1049l")
    }
}
