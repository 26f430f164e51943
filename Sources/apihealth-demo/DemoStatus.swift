@_spi(Package) import APIHealth
import APIHealthSummary
import Foundation
import LineProtocol
import Logging

/// The demo's status line on a terminal, its warning when the destination cannot be reached, and the
/// per-endpoint summary of what it writes to the spool while it runs.
final class DemoStatus: Sendable {
    let counters: DemoCounters
    /// One agent, or one per country.
    let agents: [APIHealthAgent]
    /// Seconds of traffic asked for.
    let total: Double
    let destination: String?
    /// Where lines wait until they are sent (the spool, or memory only), as the warning says it.
    let pendingLinesAre: String
    let logger: Logger
    /// Guards whether the warning was given.
    private let warned = Locked(false)

    init(
        counters: DemoCounters,
        agents: [APIHealthAgent],
        total: Double,
        destination: String?,
        pendingLinesAre: String,
        logger: Logger
    ) {
        self.counters = counters
        self.agents = agents
        self.total = total
        self.destination = destination
        self.pendingLinesAre = pendingLinesAre
        self.logger = logger
    }

    /// Until cancelled: the status line four times a second (on a terminal only) and the spools' new
    /// lines into `aggregator` once a second. Returns both for the final poll and table.
    func run(
        followers: [SpoolFollower],
        aggregator: SummaryAggregator,
        intervalPoints: Locked<[Point]>
    ) async -> ([SpoolFollower], SummaryAggregator) {
        var followers = followers
        var aggregator = aggregator
        let onTerminal = Terminal.isTerminal
        let start = ContinuousClock.now
        var tick = 0
        while !Task.isCancelled {
            warnIfUnreachable(clearingLine: onTerminal)
            if tick % 4 == 0, !followers.isEmpty {
                for index in followers.indices {
                    try? followers[index].poll(reportingTornTails: false) { segment in
                        for problem in segment.problems { aggregator.count(problem) }
                        for line in segment.lines { aggregator.add(line) }
                    }
                }
                let points = intervalPoints.withLock { points in
                    defer { points = [] }
                    return points
                }
                for point in points { aggregator.add(intervalPoint: point) }
            }
            if onTerminal { Terminal.write("\r" + line(elapsed: ContinuousClock.now - start) + "\u{1B}[K") }
            tick += 1
            try? await Task.sleep(for: .milliseconds(250))
        }
        if onTerminal { Terminal.write("\r\u{1B}[K") }
        return (followers, aggregator)
    }

    /// The status line, cut to the terminal's width.
    func line(elapsed: Duration) -> String {
        let seen = counters.snapshot
        let metrics = agents.map(\.metrics)
        let pending = metrics.reduce(0) { $0 + $1.pendingLines }
        let written = metrics.reduce(0) { $0 + $1.pointsWritten }
        let text =
            "\(elapsed.components.seconds)s/\(Int(total))s  requests \(seen.requests)  errors \(seen.errors)"
            + "  parse failures \(seen.parseFailures)  points pending \(pending)  written \(written)"
        return String(text.prefix(max(10, Terminal.columns() - 1)))
    }

    /// Says once, at warning level, that the destination cannot be reached and why: when an agent's
    /// sending has failed and it has written nothing yet. Returns whether it said so now.
    @discardableResult
    func warnIfUnreachable(clearingLine: Bool = false) -> Bool {
        guard let destination, let error = agents.lazy.compactMap(Self.sendingError).first else { return false }
        let first = warned.withLock { warned in
            defer { warned = true }
            return !warned
        }
        guard first else { return false }
        if clearingLine { Terminal.write("\r\u{1B}[K") }
        logger.warning(
            "cannot send to \(destination): \(error); points stay pending \(pendingLinesAre)",
            metadata: ["apihealth.destination": "\(destination)"]
        )
        return true
    }

    /// Why `agent` cannot send, when its sending has failed and it has written nothing yet.
    private static func sendingError(_ agent: APIHealthAgent) -> String? {
        let metrics = agent.metrics
        guard metrics.pointsWritten == 0, metrics.retries > 0 || metrics.pointsRejected > 0 else { return nil }
        return metrics.lastError
    }
}
