@_spi(Benchmarking) @_spi(Package) import APIHealth
import APIHealthMetrics
import APIHealthSummary
import APIHealthTestKit
import ArgumentParser
import CoreMetrics
import Foundation
import LineProtocol
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real instrumented service run: a local API, clients calling it through instrumented sessions,
/// and the agent shipping what it sees (or keeping it pending, in the spool or in memory, when no
/// InfluxDB is set).
@main
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apihealth-demo",
        abstract: "Run an instrumented service against a local API and ship its health to InfluxDB.",
        discussion: """
            While it runs on a terminal, a status line shows the time elapsed, requests, errors and points \
            pending and written; at the end it prints the counters and one row per endpoint (the table \
            influx-tail --summary prints for the spool).

            Without INFLUX_URL the lines stay pending in the spool: look at them with influx-tail. With \
            APIHEALTH_SPOOL_DIR=none they are kept in memory only, and lost at exit.

            Environment:
              INFLUX_URL           where to ship (http://host:8086); unset: keep pending
              INFLUX_WRITE_API     v2 (default, /api/v2/write) or v1 (/write, InfluxDB 1.x)
              INFLUX_ORG           v2: the organisation
              INFLUX_BUCKET        v2: the bucket
              INFLUX_TOKEN         the API token (or INFLUX_TOKEN_FILE, a file holding it)
              INFLUX_DATABASE      v1: the database
              APIHEALTH_SPOOL_DIR  the spool directory (none: pending lines in memory)
              APIHEALTH_ENABLED    0 turns the agent off: the service runs, nothing is recorded
              APIHEALTH_OBJECTIVE_AVAILABILITY, APIHEALTH_OBJECTIVE_LATENCY, APIHEALTH_OBJECTIVE_LATENCY_MS
                                   the endpoints' objectives (default: \(Self.defaultObjectivesText))

            With objectives, the table shows per endpoint each objective, the budget used and the burn rate \
            over the last 5 minutes, and marks the endpoints burning fastest (see influx-tail --help).

            SIGTERM and Ctrl-C stop the traffic and flush what is pending before exit.
            """
    )

    @Option(help: "How long to send traffic, in seconds.")
    var duration: Double = 30

    @Option(help: "Requests per second.")
    var rate: Double = 40

    @Option(help: "Comma-separated modules to exercise (catalog, checkout, accounts).")
    var modules: String = "catalog,checkout,accounts"

    @Flag(
        inversion: .prefixedNo,
        help: """
            Give every endpoint the demo's objectives (\(Self.defaultObjectivesText)) when APIHEALTH_OBJECTIVE_* \
            set none.
            """
    )
    var defaultObjectives = true

    /// The objectives the demo sets when the environment sets none: the examples the documentation uses.
    static let demoObjectives = ObjectiveOptions(
        default: .init(availability: 0.999, latency: .init(target: 0.99, threshold: .milliseconds(300)))
    )
    static let defaultObjectivesText = "availability 99.9 %, latency 99 % within 300 ms"

    func validate() throws {
        if duration <= 0 { throw ValidationError("--duration must be positive") }
        if rate <= 0 || rate > 5_000 { throw ValidationError("--rate must be between 0 and 5000") }
        let known = Set(DemoAPI.endpoints.map(\.module))
        for module in moduleList where !known.contains(module) {
            throw ValidationError("unknown module '\(module)'; choose from \(known.sorted().joined(separator: ", "))")
        }
    }

    var moduleList: [String] { modules.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }

    func run() async throws {
        var logger = Logger(label: "apihealth-demo")
        logger.logLevel = .notice
        let configuration: APIHealthConfiguration
        do {
            var loaded = try APIHealthConfiguration.fromEnvironment(serviceName: "apihealth-demo")
            loaded.batching.flushDelay = min(loaded.batching.flushDelay, .seconds(5))
            if defaultObjectives && loaded.objectives == ObjectiveOptions() { loaded.objectives = Self.demoObjectives }
            configuration = loaded
        } catch {
            throw ValidationError("configuration: \(error)")
        }
        let agent = try APIHealthAgent(configuration: configuration, logger: logger)
        // Every swift-metrics Counter, Meter and Timer of this process goes out through the agent too.
        MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: agent))
        // Lines already in the spool were recorded by earlier runs: counted apart from this run's.
        let leftovers = agent.metrics.pendingLines
        let runStart = Int64(Date().timeIntervalSince1970 * 1e9)
        let server = try await LoopbackHTTPServer.start(threads: 2, handler: DemoAPI.handle)
        let counters = DemoCounters()
        let traffic = DemoTraffic(
            agent: agent,
            baseURL: server.baseURL,
            modules: moduleList,
            rate: rate,
            duration: .seconds(duration),
            counters: counters,
            logger: logger
        )
        let keeping = Self.wherePendingLinesAre(configuration)
        let destination = configuration.destination.map { $0.redactedURL } ?? "nowhere (pending \(keeping))"
        if configuration.isEnabled {
            print("apihealth-demo: local API at \(server.baseURL), shipping to \(destination)")
        } else {
            print(
                "apihealth-demo: local API at \(server.baseURL); APIHealth is disabled (APIHEALTH_ENABLED=0): recording nothing"
            )
        }
        // A disabled agent makes no spool: there is nothing to follow.
        let spool = configuration.isEnabled ? configuration.spool : nil
        let follower = try spool.map { SpoolFollower(reader: try SpoolReader(directory: $0.directory)) }
        var aggregator = SummaryAggregator(
            precision: configuration.precision,
            since: runStart,
            requestMeasurement: configuration.measurement,
            parseFailureMeasurement: configuration.parseFailureMeasurement,
            intervalMeasurement: configuration.aggregation?.measurement ?? PointSchema.Measurement.requestInterval
        )
        // Every request is in an interval point, handed over as it is recorded: the table counts them all,
        // whether or not their lines were delivered and removed from the spool before it was read.
        let intervalPoints = Locked<[Point]>([])
        if configuration.aggregation != nil {
            aggregator.readsIntervalLines = false
            agent.observeIntervalPoints { points in intervalPoints.withLock { $0.append(contentsOf: points) } }
        }
        let status = DemoStatus(
            counters: counters,
            agent: agent,
            total: duration,
            destination: configuration.destination?.redactedURL,
            pendingLinesAre: keeping,
            logger: logger
        )
        let progress = Task {
            await status.run(follower: follower, aggregator: aggregator, intervalPoints: intervalPoints)
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: agent),
                    .init(service: traffic, successTerminationBehavior: .gracefullyShutdownGroup),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
        progress.cancel()
        var (finalFollower, summary) = await progress.value
        try await server.shutdown()
        if var reader = finalFollower {
            // What the agent wrote while shutting down (the last batch, its health point).
            try? reader.poll(reportingTornTails: false) { segment in
                for problem in segment.problems { summary.count(problem) }
                for line in segment.lines { summary.add(line) }
            }
            finalFollower = reader
        }
        for point in intervalPoints.withLock({ $0 }) { summary.add(intervalPoint: point) }
        intervalPoints.withLock { $0 = [] }
        status.warnIfUnreachable()
        printSummary(counters: counters, agent: agent, configuration: configuration, leftovers: leftovers)
        if finalFollower != nil {
            let rows = SummaryOrder.worst.sorted(summary.rows())
            print("")
            print(
                SummaryTable(width: Terminal.columns(), colors: Terminal.wantsColors("auto")).render(
                    rows,
                    counts: summary.counts
                ),
                terminator: ""
            )
        } else if !configuration.isEnabled {
            print(
                "APIHealth is disabled (APIHEALTH_ENABLED=0): nothing was recorded, so there is no per-endpoint table."
            )
        } else {
            print("No spool (APIHEALTH_SPOOL_DIR=none): no per-endpoint table; it is read from the spool.")
        }
    }

    /// Where lines wait until they are sent: in the spool, or in memory only (lost at exit) without one.
    static func wherePendingLinesAre(_ configuration: APIHealthConfiguration) -> String {
        if let spool = configuration.spool { return "in the spool at \(spool.directory.path)" }
        return "in memory only (APIHEALTH_SPOOL_DIR=none): lost at exit"
    }

    private func printSummary(
        counters: DemoCounters,
        agent: APIHealthAgent,
        configuration: APIHealthConfiguration,
        leftovers: Int
    ) {
        let seen = counters.snapshot
        let metrics = agent.metrics
        // Lines neither delivered nor on disk when the agent let go of the spool (a full disk, or no spool)
        // are lost, not pending: each point is counted once, so written, pending and lost add up.
        let lost = Int(clamping: metrics.pointsLost)
        let kept = max(0, metrics.pendingLines - lost)
        // The agent sends what it found in the spool first, so what was written goes to leftovers first.
        let earlierPending = max(0, min(kept, leftovers - Int(clamping: metrics.pointsWritten)))
        var text = """
            apihealth-demo summary
              requests         \(seen.requests)
              errors           \(seen.errors)
              parse failures   \(seen.parseFailures)
              interval points  \(metrics.intervalPoints)
              points written   \(metrics.pointsWritten)
              points pending   \(kept - earlierPending)
              points lost      \(lost)
              points dropped   \(metrics.pointsDropped)
              points rejected  \(metrics.pointsRejected)
            """
        if leftovers > 0 {
            text +=
                "\n  from earlier runs: \(leftovers) points were in the spool at start, \(earlierPending) still pending"
        }
        if configuration.destination != nil, kept > 0, let error = metrics.lastError {
            text += "\n  last error       \(error)"
        }
        print(text)
        if let spool = configuration.spool, kept > 0 {
            print("Pending lines are in \(spool.directory.path). Look at them with:")
            print("  swift run influx-tail --spool '\(spool.directory.path)' --summary")
            print("  swift run influx-tail --spool '\(spool.directory.path)' --format table -n 20")
        }
    }
}
