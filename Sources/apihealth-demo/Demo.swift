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
              APIHEALTH_RAW_POINTS the requests also written as points: all (the demo's default, one instance
                                   at a low rate), errors-and-slow (the agent's default) or none
              APIHEALTH_OBJECTIVE_AVAILABILITY, APIHEALTH_OBJECTIVE_LATENCY, APIHEALTH_OBJECTIVE_LATENCY_MS
                                   the endpoints' objectives (default: \(Self.defaultObjectivesText))

            With objectives, the table shows per endpoint each objective, the budget used and the burn rate \
            over the last 5 minutes, and marks the endpoints burning fastest (see influx-tail --help).

            Several countries (--countries BR,DE,US) run as a fleet would: one agent per country, each with \
            its country tag, its own clients and its own spool (the spool directory's sibling <dir>-BR, \
            <dir>-DE, …), the same service name; --rate is shared among them (each sends rate/N). The table \
            then has one row per endpoint and country. --unreachable-from BR sends that country's traffic to \
            a loopback port that refuses connections: every request fails to connect, recorded under the \
            API's host, as a client in that country sees it (a capture filter puts the API's host and port \
            back on each sample), so rules comparing a host across countries see it.

            SIGTERM and Ctrl-C stop the traffic and flush what is pending before exit.
            """
    )

    @Option(help: "How long to send traffic, in seconds.")
    var duration: Double = 30

    @Option(help: "Requests per second, in all (shared among --countries).")
    var rate: Double = 40

    @Option(help: "Comma-separated modules to exercise (catalog, checkout, accounts).")
    var modules: String = "catalog,checkout,accounts"

    @Option(
        help: """
            Comma-separated ISO 3166-1 alpha-2 countries to run as, one agent each (BR,DE,US); --rate is \
            shared among them.
            """
    )
    var countries: String?

    @Option(
        help: """
            A country of --countries the API cannot be reached from: its requests fail to connect, recorded \
            under the API's host.
            """
    )
    var unreachableFrom: String?

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
        let countries = try countryList()
        if let unreachableFrom {
            guard let country = CountryCode(unreachableFrom) else {
                throw ValidationError(
                    "--unreachable-from '\(unreachableFrom)' is not an ISO 3166-1 alpha-2 country code"
                )
            }
            guard countries.contains(country.code) else {
                throw ValidationError("--unreachable-from \(country.code) must name one of --countries")
            }
        }
    }

    /// The countries of `--countries`, upper case, in the order given; empty without the option.
    func countryList() throws -> [String] {
        guard let countries else { return [] }
        var codes: [String] = []
        for text in countries.split(separator: ",", omittingEmptySubsequences: false) {
            guard let code = CountryCode(text) else {
                throw ValidationError("--countries: '\(text)' is not an ISO 3166-1 alpha-2 country code")
            }
            guard !codes.contains(code.code) else { throw ValidationError("--countries: \(code.code) twice") }
            codes.append(code.code)
        }
        return codes
    }

    /// The country `--unreachable-from` names, upper case.
    var unreachableCountry: String? { unreachableFrom.flatMap { CountryCode($0)?.code } }

    var moduleList: [String] { modules.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }

    /// One agent of the run: the service as it runs in one country (or the only one, without --countries).
    struct Member {
        var country: String?
        var agent: APIHealthAgent
        var configuration: APIHealthConfiguration
        /// Lines already in its spool at start: recorded by earlier runs.
        var leftovers: Int
        /// Where its traffic goes: the local API, or a port that refuses connections.
        var baseURL: String
        /// The port refusing its connections, held for the run, when the API is unreachable from its country.
        var refusing: RefusingSocket?
    }

    func run() async throws {
        var logger = Logger(label: "apihealth-demo")
        logger.logLevel = .notice
        let loaded: APIHealthConfiguration
        do {
            var configuration = try APIHealthConfiguration.fromEnvironment(serviceName: "apihealth-demo")
            configuration.batching.flushDelay = min(configuration.batching.flushDelay, .seconds(5))
            if defaultObjectives && configuration.objectives == ObjectiveOptions() {
                configuration.objectives = Self.demoObjectives
            }
            // The demo shows what to cache unless the environment says otherwise (APIHEALTH_CACHE_ADVICE=0).
            if ProcessInfo.processInfo.environment[EnvironmentVariable.cacheAdvice.rawValue] == nil {
                configuration.capture.cacheAdvice = true
            }
            // One instance at a low rate: a point for every request (the closing table's p95 over time,
            // influx-tail's lines, the dashboards' raw-point panels), unless the environment chooses the raw
            // points (APIHEALTH_RAW_POINTS, APIHEALTH_RAW_POINTS_PER_SECOND or the app preset).
            if ProcessInfo.processInfo.environment[EnvironmentVariable.rawPoints.rawValue] == nil,
                configuration.capture.rawPoints == .errorsAndSlow
            {
                configuration.capture.rawPoints = .all
            }
            loaded = configuration
        } catch {
            throw ValidationError("configuration: \(error)")
        }
        let countries = try countryList()
        let server = try await LoopbackHTTPServer.start(threads: 2, handler: DemoAPI.handle)
        let members: [Member]
        do {
            members = try makeMembers(loaded, countries: countries, apiBaseURL: server.baseURL, logger: logger)
        } catch {
            try? await server.shutdown()
            throw error
        }
        let configuration = members[0].configuration
        // Every swift-metrics Counter, Meter and Timer of this process goes out through the (first) agent too.
        MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: members[0].agent))
        let runStart = Int64(Date().timeIntervalSince1970 * 1e9)
        let counters = DemoCounters()
        let traffic = members.map { member in
            DemoTraffic(
                agent: member.agent,
                baseURL: member.baseURL,
                modules: moduleList,
                rate: rate / Double(members.count),
                duration: .seconds(duration),
                counters: counters,
                logger: logger,
                retriesConnections: member.refusing == nil
            )
        }
        let keeping = Self.wherePendingLinesAre(members.map(\.configuration))
        let destination = configuration.destination.map { $0.redactedURL } ?? "nowhere (pending \(keeping))"
        if configuration.isEnabled {
            print("apihealth-demo: local API at \(server.baseURL), shipping to \(destination)")
        } else {
            print(
                "apihealth-demo: local API at \(server.baseURL); APIHealth is disabled (APIHEALTH_ENABLED=0): recording nothing"
            )
        }
        if !countries.isEmpty {
            var fleet = "apihealth-demo: one agent per country: \(countries.joined(separator: ", "))"
            if let member = members.first(where: { $0.refusing != nil }), let country = member.country {
                fleet +=
                    "; unreachable from \(country) (its requests go to \(member.baseURL), which refuses connections)"
            }
            print(fleet)
        }
        // A disabled agent makes no spool: there is nothing to follow.
        let followers = try members.compactMap { member -> SpoolFollower? in
            guard member.configuration.isEnabled, let spool = member.configuration.spool else { return nil }
            return SpoolFollower(reader: try SpoolReader(directory: spool.directory))
        }
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
        if let aggregation = configuration.aggregation {
            aggregator.cacheAdvice = CacheAdviceAggregator(
                intervalMeasurement: aggregation.measurement,
                interval: aggregation.interval
            )
            aggregator.readsIntervalLines = false
            for member in members {
                member.agent.observeIntervalPoints { points in
                    intervalPoints.withLock { $0.append(contentsOf: points) }
                }
            }
        }
        let status = DemoStatus(
            counters: counters,
            agents: members.map(\.agent),
            total: duration,
            destination: configuration.destination?.redactedURL,
            pendingLinesAre: keeping,
            logger: logger
        )
        let progress = Task {
            await status.run(followers: followers, aggregator: aggregator, intervalPoints: intervalPoints)
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: members.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0.agent) }
                    + [
                        .init(
                            service: DemoFleetTraffic(traffic: traffic),
                            successTerminationBehavior: .gracefullyShutdownGroup
                        )
                    ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
        )
        try await group.run()
        progress.cancel()
        var (finalFollowers, summary) = await progress.value
        try await server.shutdown()
        for index in finalFollowers.indices {
            // What the agents wrote while shutting down (the last batch, its health point).
            try? finalFollowers[index].poll(reportingTornTails: false) { segment in
                for problem in segment.problems { summary.count(problem) }
                for line in segment.lines { summary.add(line) }
            }
        }
        for point in intervalPoints.withLock({ $0 }) { summary.add(intervalPoint: point) }
        intervalPoints.withLock { $0 = [] }
        status.warnIfUnreachable()
        printSummary(counters: counters, members: members)
        withExtendedLifetime(members.map(\.refusing)) {}
        if !finalFollowers.isEmpty {
            let rows = SummaryOrder.worst.sorted(summary.rows())
            let width = Terminal.columns()
            let colors = Terminal.wantsColors("auto")
            print("")
            print(SummaryTable(width: width, colors: colors).render(rows, counts: summary.counts), terminator: "")
            // What to cache, when the agents gave cache advice (APIHEALTH_CACHE_ADVICE=1).
            let whatToCache = CacheAdviceTable(width: width, colors: colors).section(summary.cacheAdvice.rows())
            if !whatToCache.isEmpty { print("\n" + whatToCache, terminator: "") }
        } else if !configuration.isEnabled {
            print(
                "APIHealth is disabled (APIHEALTH_ENABLED=0): nothing was recorded, so there is no per-endpoint table."
            )
        } else {
            print("No spool (APIHEALTH_SPOOL_DIR=none): no per-endpoint table; it is read from the spool.")
        }
    }

    /// One agent per country of `countries` (one without), each tagged with its country and writing to its
    /// own spool (the spool directory's sibling `<dir>-BR`); the unreachable country's traffic goes to a port
    /// that refuses connections and is recorded under `apiBaseURL`'s host and port.
    private func makeMembers(
        _ loaded: APIHealthConfiguration,
        countries: [String],
        apiBaseURL: String,
        logger: Logger
    ) throws -> [Member] {
        guard !countries.isEmpty else {
            let agent = try APIHealthAgent(configuration: loaded, logger: logger)
            return [
                Member(
                    country: nil,
                    agent: agent,
                    configuration: loaded,
                    leftovers: agent.metrics.pendingLines,
                    baseURL: apiBaseURL
                )
            ]
        }
        let apiPort = URL(string: apiBaseURL)?.port
        return try countries.map { country in
            var configuration = loaded
            configuration.country = country
            if let directory = configuration.spool?.directory {
                configuration.spool?.directory = directory.deletingLastPathComponent()
                    .appendingPathComponent(directory.lastPathComponent + "-" + country, isDirectory: true)
            }
            var refusing: RefusingSocket?
            if country == unreachableCountry {
                let socket = try RefusingSocket()
                refusing = socket
                let refusedPort = socket.port
                // Recorded as a client in that country sees it: a request to the API's host that fails to connect.
                configuration.capture.filter = { sample, _ in
                    guard var parts = URLComponents(url: sample.url, resolvingAgainstBaseURL: false),
                        parts.port == refusedPort, let apiPort
                    else { return sample }
                    parts.port = apiPort
                    var recorded = sample
                    recorded.url = parts.url ?? sample.url
                    return recorded
                }
            }
            let agent = try APIHealthAgent(configuration: configuration, logger: logger)
            return Member(
                country: country,
                agent: agent,
                configuration: configuration,
                leftovers: agent.metrics.pendingLines,
                baseURL: refusing?.baseURL ?? apiBaseURL,
                refusing: refusing
            )
        }
    }

    /// Where lines wait until they are sent: in the spool (one per agent), or in memory only (lost at exit)
    /// without one.
    static func wherePendingLinesAre(_ configurations: [APIHealthConfiguration]) -> String {
        let spools = configurations.compactMap { $0.spool?.directory.path }
        if spools.count == 1 { return "in the spool at \(spools[0])" }
        if !spools.isEmpty { return "in the spools at \(spools.joined(separator: ", "))" }
        return "in memory only (APIHEALTH_SPOOL_DIR=none): lost at exit"
    }

    private func printSummary(counters: DemoCounters, members: [Member]) {
        let seen = counters.snapshot
        let all = members.map(\.agent.metrics)
        func sum(_ value: (AgentMetrics) -> UInt64) -> UInt64 { all.reduce(0) { $0 + value($1) } }
        // Lines neither delivered nor on disk when an agent let go of its spool (a full disk, or no spool)
        // are lost, not pending: each point is counted once, so written, pending and lost add up.
        var lost = 0
        var kept = 0
        var earlierPending = 0
        for (member, metrics) in zip(members, all) {
            let memberLost = Int(clamping: metrics.pointsLost)
            let memberKept = max(0, metrics.pendingLines - memberLost)
            lost += memberLost
            kept += memberKept
            // An agent sends what it found in its spool first, so what it wrote goes to leftovers first.
            earlierPending += max(0, min(memberKept, member.leftovers - Int(clamping: metrics.pointsWritten)))
        }
        let leftovers = members.reduce(0) { $0 + $1.leftovers }
        var text = """
            apihealth-demo summary
              requests         \(seen.requests)
              errors           \(seen.errors)
              parse failures   \(seen.parseFailures)
              interval points  \(sum(\.intervalPoints))
              points written   \(sum(\.pointsWritten))
              points pending   \(kept - earlierPending)
              points lost      \(lost)
              points dropped   \(sum(\.pointsDropped))
              points rejected  \(sum(\.pointsRejected))
            """
        if leftovers > 0 {
            text +=
                "\n  from earlier runs: \(leftovers) points were in the spool at start, \(earlierPending) still pending"
        }
        let configuration = members[0].configuration
        if configuration.destination != nil, kept > 0, let error = all.compactMap(\.lastError).first {
            text += "\n  last error       \(error)"
        }
        print(text)
        let spools = members.compactMap { $0.configuration.spool?.directory.path }
        if !spools.isEmpty, kept > 0 {
            print("Pending lines are in \(spools.joined(separator: ", ")). Look at them with:")
            for spool in spools {
                print("  swift run influx-tail --spool '\(spool)' --summary")
            }
            print("  swift run influx-tail --spool '\(spools[0])' --format table -n 20")
        }
    }
}
