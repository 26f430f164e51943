import APIHealth
import APIHealthSummary
import ArgumentParser
import Foundation
import LineProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Prints the lines an APIHealth agent has recorded and the server has not yet acknowledged.
@main
struct InfluxTail: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "influx-tail",
        abstract: "Print the line protocol an APIHealth agent has recorded and not yet delivered.",
        discussion: """
            Lines are printed in send order, exactly as they will be sent: a request is recorded when it completes, \
            and its timestamp is when it started, so neighbouring timestamps can be out of order. \
            --format table sorts the lines it prints by timestamp.

            --summary prints one row per endpoint (host, path, method) from the pending apihealth_request lines: \
            requests, errors, error %, p50/p95/p99 of duration_ms, the latest status, parse failures \
            (apihealth_parse_failure lines) and p95 over the time covered (\(SummaryAggregator.sparklineSlots) slots \
            on one time axis shared by every row, newest at the right). Percentiles are nearest-rank: the value at \
            rank ceil(p/100 x n) of the sorted durations, exact up to \(SummaryAggregator.exactLimit) requests per \
            endpoint and within 1 % past that. Where an endpoint's apihealth_request_interval points count more \
            requests than its raw points (APIHEALTH_RAW_POINTS=errors-and-slow or none: raw points are sampled), \
            its requests, errors and percentiles come from the interval points: the counts are exact and each \
            percentile, shown as ≤ N, is the upper bound of the histogram bucket that holds it; the footer says \
            how many endpoints were read that way (JSON: "source"). The footer's requests are the rows' own, \
            summed (raw request lines, when they count otherwise, are said apart). When lines carry the country \
            tag (APIHEALTH_COUNTRY), rows are per endpoint and country and a COUNTRY column follows the endpoint \
            (JSON: "country"). A long endpoint is shortened host first, a loopback host left out, so the end of \
            its path stays readable. Rows are worst first (error %, then p99) unless --sort says \
            otherwise. On a terminal, error % is yellow from \(Int(SummaryTable.errorPercentWarning)) % and red from \
            \(Int(SummaryTable.errorPercentAlarm)) %, p99 yellow from \(Int(SummaryTable.p99Warning)) ms and red from \
            \(Int(SummaryTable.p99Alarm)) ms. Torn, corrupt and foreign lines are counted in the footer. With -f \
            the summary is redrawn every second (appended as a new snapshot when something changed, if stdout is \
            not a terminal) until Ctrl-C or SIGTERM.

            Objectives (APIHEALTH_OBJECTIVE_AVAILABILITY, APIHEALTH_OBJECTIVE_LATENCY with \
            APIHEALTH_OBJECTIVE_LATENCY_MS) travel on the interval points; when an endpoint's points carry one, \
            the table adds per objective (A. availability, L. latency) the objective, USED (the budget spent over \
            the interval points read: bad requests / ((1 - objective) x requests); 40% is 40 % of the budget, from \
            the whole budget on it counts budgets: 1.0× spent exactly it, 67× sixty-seven times it) and BURN\(SummaryTable.burnWindowMinutes)m (the burn rate, bad share / \
            (1 - objective), over the interval points of the last \(SummaryTable.burnWindowMinutes) minutes before \
            the newest one read, all of them when the spool spans less; - without requests then). Bad is failed \
            (errors) for availability and slower than the threshold (count - requests_within_latency_objective) \
            for latency, as the shipped burn-rate alerts count them. The ! column marks the endpoints burning \
            fastest: !! at a burn rate of \(SummaryTable.burnRatePage) or more (the rate that pages over 1 hour), ! \
            at \(Int(SummaryTable.burnRateWarning)) or more (the rate that pages over 6 hours); on a terminal they \
            and their burn rates are red and yellow, and a budget used up (1.0× or more) is red. --sort burn puts the \
            fastest first. Without objectives the table has none of these columns.

            --cache prints the cache advice of the interval points (the agent's cache advisor, off unless \
            capture.cacheAdvice = true or APIHEALTH_CACHE_ADVICE=1): one row per endpoint (host, path, method, \
            module; summed across status classes and intervals), the most waiting a cache would have saved \
            first. For each max-age of 1 s, 10 s, 60 s, 5 min and 1 h the agent simulates a private cache that \
            stores a copy when it fetches and serves it while fresh. JUDGED counts the responses the caches \
            judged (cache_judged: a cacheable response read to its end, not in flight beside a duplicate); TTL is \
            the longest max-age whose changed bodies stay under 1 % of them ("private" when some responses were \
            one user's: the client's own cache only, never a shared one); HITS and STALE the shares it would \
            have served unchanged and changed; SAVED the waiting of its hits; SAVED/MIN that per minute observed \
            (from the first to the last interval point, plus one 10 s interval); HEADERS SAY what the responses \
            stated: no-store, no lifetime, max-age/Expires, per-user, 304 revalidations, local cache hits; \
            requests made while the same was in flight are named apart (coalescable). Endpoints whose points \
            carry no cache fields are left out; when none does, one line says the advice is off. -n, --where, --width \
            and --format json apply as for --summary, and --summary ends with the few endpoints that would \
            have saved most (What to cache).

            Examples:
              influx-tail --spool ~/.local/state/apihealth/checkout
              influx-tail --service checkout -n 20 --format table
              influx-tail --service checkout -f --where module=payments --where status=500
              influx-tail --service checkout --format json | jq '.fields.duration_ms'
              influx-tail --service checkout --summary -f
              influx-tail --service checkout --summary --format json | jq .p99_ms
              influx-tail --service checkout --summary --sort burn
              influx-tail --schema | jq .intervalFields
              influx-tail --service checkout --cache -n 10
              influx-tail --service checkout --stats
              influx-tail --service checkout --rejected

            Exit status: 0 on success (a summary that left lines out included), 1 on an error (missing spool, \
            no permission, a corrupt segment), 2 on bad usage. With -f, a spool that does not exist yet is \
            waited for.
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case line, table, json
    }

    enum ColorChoice: String, ExpressibleByArgument, CaseIterable {
        case auto, always, never
    }

    @Option(help: "The spool directory (default: $APIHEALTH_SPOOL_DIR, or the --service default).")
    var spool: String?

    @Option(help: "The service whose default spool directory to read.")
    var service: String?

    @Option(
        name: .customShort("n"),
        help: "Print only the last N lines (with --summary or --cache: the first N rows)."
    )
    var last: Int?

    @Flag(
        name: [.short, .long],
        help: "Keep printing lines as they are recorded (with --summary or --cache: redraw every second)."
    )
    var follow = false

    @Option(help: "Output format: line, table or json (--summary, --cache: table or json).")
    var format: Format = .line

    @Flag(help: "One row per endpoint: requests, errors, percentiles, latest status, parse failures, p95 over time.")
    var summary = false

    @Flag(
        help: """
            One row per endpoint with cache advice: the longest max-age serving few changed bodies, the share \
            it would have served, the waiting it would have saved, what the headers say.
            """
    )
    var cache = false

    @Option(
        help: """
            Summary order: worst (error %, then p99; the default), burn (current burn rate), requests, errors, \
            p50, p95, p99 or endpoint.
            """
    )
    var sort: SummaryOrder?

    @Option(help: "Summary width in columns (default: the terminal's, else $COLUMNS, else 120).")
    var width: Int?

    @Option(name: .customLong("where"), help: "Only lines with this tag value (tag=value); repeatable.")
    var filters: [String] = []

    @Option(help: "Only lines of this measurement.")
    var measurement: String?

    @Flag(help: "Print pending lines and bytes, the oldest pending age, counts per host and status, rejected batches.")
    var stats = false

    @Flag(help: "Print the batches the server refused, with its reasons.")
    var rejected = false

    @Option(help: "Colours: auto (only on a terminal), always or never.")
    var color: ColorChoice = .auto

    @Flag(help: "Print every measurement, tag and field name the agent writes, as JSON, and exit (reads no spool).")
    var schema = false

    func validate() throws {
        if let last, last < 0 { throw ValidationError("-n takes a number of lines, 0 or more") }
        for filter in filters where !filter.contains("=") || filter.hasPrefix("=") {
            throw ValidationError("--where takes tag=value, not '\(filter)'")
        }
        if stats && rejected { throw ValidationError("--stats and --rejected cannot be combined") }
        if follow && (stats || rejected) {
            throw ValidationError("--follow prints lines; it cannot be combined with --stats or --rejected")
        }
        if summary && (stats || rejected) {
            throw ValidationError("--summary cannot be combined with --stats or --rejected")
        }
        if cache && (summary || stats || rejected) {
            throw ValidationError("--cache cannot be combined with --summary, --stats or --rejected")
        }
        if cache && sort != nil {
            throw ValidationError("--sort orders --summary; --cache ranks by the waiting a cache would have saved")
        }
        if schema && (summary || cache || stats || rejected || follow) {
            throw ValidationError("--schema prints the names the agent writes; it takes no other mode")
        }
        if let width, width < SummaryTable.minimumWidth {
            throw ValidationError("--width takes \(SummaryTable.minimumWidth) columns or more")
        }
    }

    static func main() {
        // A parent may have spawned us with SIGTERM/SIGINT blocked (the mask is inherited): `--follow`
        // must still stop on them.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
        do {
            var command = try parseAsRoot()
            if let tail = command as? InfluxTail, (tail.summary || tail.cache) && tail.follow {
                // Before any thread starts, so every thread has them blocked: the redraw loop takes them
                // with sigtimedwait and restores the terminal before it exits.
                SignalWaiter.blockSignals()
            }
            try command.run()
        } catch let failure as TailFailure {
            FileHandle.standardError.write(Data("influx-tail: \(failure.message)\n".utf8))
            Foundation.exit(1)
        } catch is StopRequested {
            Foundation.exit(0)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)
            }
            // The message already ends with the usage and the hint to --help.
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            if code == .validationFailure { Foundation.exit(2) }
            Foundation.exit(1)
        }
    }

    func run() throws {
        if schema {
            print(try PointSchemaDescription.current.json(), terminator: "")
            return
        }
        let directory = try spoolDirectory()
        if summary || cache {
            try SummaryCommand(
                directory: directory,
                follow: follow,
                json: format == .json,
                order: sort ?? .worst,
                rows: last,
                width: width,
                colors: Terminal.wantsColors(color.rawValue),
                measurement: measurement,
                tags: LineFilter(measurement: nil, tags: filters).tags.map { (key: $0.0, value: $0.1) },
                view: cache ? .cache : .endpoints
            ).run()
            return
        }
        let reader = try Self.openReader(directory, waiting: follow) {
            usleep(500_000)
            return true
        }
        let colors = Terminal.wantsColors(color.rawValue)
        var printer = LinePrinter(format: format, precision: reader.precision, colors: colors)
        let filter = LineFilter(measurement: measurement, tags: filters)
        if stats {
            try printStats(reader, printer: &printer)
            return
        }
        if rejected {
            try printRejected(reader, printer: &printer, filter: filter)
            return
        }
        var follower = SpoolFollower(reader: reader)
        var corrupt = false
        let firstLines = try follower.pollReporting(tornTails: !follow)
        for problem in firstLines.problems {
            corrupt = true
            FileHandle.standardError.write(Data("influx-tail: \(Terminal.visible(problem.description))\n".utf8))
        }
        Self.warnAboutUnknownTags(filter.tags.map(\.0), lines: firstLines.lines)
        var selected = firstLines.lines.filter { filter.matches($0) }
        if let last { selected = Array(selected.suffix(last)) }
        printer.printLines(selected)
        printer.flush()
        if follow {
            while true {
                usleep(50_000)
                let next = try follower.pollReporting(tornTails: false)
                for problem in next.problems {
                    FileHandle.standardError.write(Data("influx-tail: \(Terminal.visible(problem.description))\n".utf8))
                }
                printer.printLines(next.lines.filter { filter.matches($0) })
                printer.flush()
            }
        }
        if corrupt {
            throw TailFailure(message: "the spool holds lines or entries that will not be sent (reported above)")
        }
    }

    /// Opens the spool; while following, a spool that does not exist yet is waited for (like `tail -F`),
    /// calling `pause` between tries until it returns `false`.
    static func openReader(_ directory: URL, waiting: Bool, pause: () -> Bool) throws -> SpoolReader {
        var announced = false
        while true {
            do {
                return try SpoolReader(directory: directory)
            } catch  where waiting && error.code == .missing {
                if !announced {
                    FileHandle.standardError.write(
                        Data("influx-tail: no spool at \(directory.path) yet; waiting for it\n".utf8)
                    )
                    announced = true
                }
                guard pause() else { throw StopRequested() }
            } catch {
                throw TailFailure(message: "\(error)")
            }
        }
    }

    /// Says once on stderr which `--where` keys no line has (only when there are lines to judge by).
    static func warnAboutUnknownTags(_ keys: [String], lines: [[UInt8]]) {
        guard !keys.isEmpty, !lines.isEmpty else { return }
        var missing = Set(keys)
        let parser = LineParser()
        for line in lines where !missing.isEmpty {
            guard let point = try? parser.parseLine(line) else { continue }
            for tag in point.tags { missing.remove(tag.key) }
        }
        warnAboutUnknownTags(keys.filter { missing.contains($0) })
    }

    static func warnAboutUnknownTags(_ keys: [String]) {
        var said = Set<String>()
        for key in keys where said.insert(key).inserted {
            FileHandle.standardError.write(
                Data(
                    "influx-tail: no line has a tag '\(Terminal.visible(key))'; --where \(Terminal.visible(key))=… matches nothing\n"
                        .utf8
                )
            )
        }
    }

    private func spoolDirectory() throws -> URL {
        if let spool { return URL(fileURLWithPath: (spool as NSString).expandingTildeInPath) }
        if let environment = ProcessInfo.processInfo.environment["APIHEALTH_SPOOL_DIR"], !environment.isEmpty,
            environment != "none"
        {
            return URL(fileURLWithPath: environment)
        }
        if let service { return SpoolOptions.defaultDirectory(serviceName: service) }
        throw ValidationError("give --spool DIR or --service NAME (or set APIHEALTH_SPOOL_DIR)")
    }

    private func printStats(_ reader: SpoolReader, printer: inout LinePrinter) throws {
        var follower = SpoolFollower(reader: reader)
        let snapshot = try follower.pollReporting(tornTails: false)
        let rejectedBatches = (try? reader.rejected()) ?? []
        let summary = SpoolStats(
            lines: snapshot.lines,
            segments: follower.segmentCount,
            rejected: rejectedBatches,
            precision: reader.precision
        )
        printer.printStats(summary)
        printer.flush()
    }

    private func printRejected(_ reader: SpoolReader, printer: inout LinePrinter, filter: LineFilter) throws {
        let batches: [SpoolReader.RejectedBatch]
        do {
            batches = try reader.rejected()
        } catch {
            throw TailFailure(message: "\(error)")
        }
        printer.printRejected(batches, filter: filter)
        printer.flush()
    }
}

/// An error with a message for the user; exit status 1.
struct TailFailure: Error {
    var message: String
}

/// Ctrl-C or SIGTERM while waiting: a clean exit, status 0.
struct StopRequested: Error {}

extension SummaryOrder: ExpressibleByArgument {}

extension SpoolFollower {
    /// ``poll(reportingTornTails:)`` with a spool error turned into a message for the user.
    mutating func pollReporting(tornTails: Bool) throws -> Poll {
        do {
            return try poll(reportingTornTails: tornTails)
        } catch {
            throw TailFailure(message: "\(error)")
        }
    }
}
