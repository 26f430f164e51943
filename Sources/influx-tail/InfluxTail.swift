import APIHealth
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
            Lines are printed oldest first, exactly as they will be sent.

            Examples:
              influx-tail --spool ~/.local/state/apihealth/checkout
              influx-tail --service checkout -n 20 --format table
              influx-tail --service checkout -f --where module=payments --where status=500
              influx-tail --service checkout --format json | jq '.fields.duration_ms'
              influx-tail --service checkout --stats
              influx-tail --service checkout --rejected

            Exit status: 0 on success, 1 on an error (missing spool, no permission, a corrupt
            segment), 2 on bad usage.
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

    @Option(name: .customShort("n"), help: "Print only the last N lines.")
    var last: Int?

    @Flag(name: [.short, .long], help: "Keep printing lines as they are recorded.")
    var follow = false

    @Option(help: "Output format: line, table or json.")
    var format: Format = .line

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

    func validate() throws {
        if let last, last < 0 { throw ValidationError("-n takes a number of lines, 0 or more") }
        for filter in filters where !filter.contains("=") || filter.hasPrefix("=") {
            throw ValidationError("--where takes tag=value, not '\(filter)'")
        }
        if stats && rejected { throw ValidationError("--stats and --rejected cannot be combined") }
        if follow && (stats || rejected) { throw ValidationError("--follow prints lines; it cannot be combined with --stats or --rejected") }
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
            try command.run()
        } catch let failure as TailFailure {
            FileHandle.standardError.write(Data("influx-tail: \(failure.message)\n".utf8))
            Foundation.exit(1)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)
            }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            if code == .validationFailure {
                FileHandle.standardError.write(Data("Run 'influx-tail --help' for usage.\n".utf8))
                Foundation.exit(2)
            }
            Foundation.exit(1)
        }
    }

    func run() throws {
        let directory = try spoolDirectory()
        let reader: SpoolReader
        do {
            reader = try SpoolReader(directory: directory)
        } catch {
            throw TailFailure(message: "\(error)")
        }
        let colors = color == .always || (color == .auto && isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil)
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
        let firstLines = try follower.poll(reportingTornTails: !follow)
        for problem in firstLines.problems {
            corrupt = true
            FileHandle.standardError.write(Data("influx-tail: \(LinePrinter.visible(problem.description))\n".utf8))
        }
        var selected = firstLines.lines.filter { filter.matches($0) }
        if let last { selected = Array(selected.suffix(last)) }
        printer.printLines(selected)
        printer.flush()
        if follow {
            while true {
                usleep(50_000)
                let next = try follower.poll(reportingTornTails: false)
                for problem in next.problems {
                    FileHandle.standardError.write(Data("influx-tail: \(LinePrinter.visible(problem.description))\n".utf8))
                }
                printer.printLines(next.lines.filter { filter.matches($0) })
                printer.flush()
            }
        }
        if corrupt { throw TailFailure(message: "the spool holds lines or entries that will not be sent (reported above)") }
    }

    private func spoolDirectory() throws -> URL {
        if let spool { return URL(fileURLWithPath: (spool as NSString).expandingTildeInPath) }
        if let environment = ProcessInfo.processInfo.environment["APIHEALTH_SPOOL_DIR"], !environment.isEmpty, environment != "none" {
            return URL(fileURLWithPath: environment)
        }
        if let service { return SpoolOptions.defaultDirectory(serviceName: service) }
        throw ValidationError("give --spool DIR or --service NAME (or set APIHEALTH_SPOOL_DIR)")
    }

    private func printStats(_ reader: SpoolReader, printer: inout LinePrinter) throws {
        var follower = SpoolFollower(reader: reader)
        let snapshot = try follower.poll(reportingTornTails: false)
        let rejectedBatches = (try? reader.rejected()) ?? []
        let summary = SpoolStats(lines: snapshot.lines, segments: follower.segmentCount, rejected: rejectedBatches, precision: reader.precision)
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
