import APIHealth
import APIHealthMetrics
import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import LoopbackHTTPServer
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real instrumented service run: a local API, clients calling it through instrumented sessions,
/// and the agent shipping what it sees (or keeping it pending in the spool when no InfluxDB is set).
@main
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apihealth-demo",
        abstract: "Run an instrumented service against a local API and ship its health to InfluxDB.",
        discussion: """
            Without INFLUX_URL the lines stay pending in the spool: look at them with influx-tail.
            With INFLUX_URL, INFLUX_ORG, INFLUX_BUCKET and INFLUX_TOKEN set, they are shipped there.
            SIGTERM and Ctrl-C stop the traffic and flush what is pending before exit.
            """
    )

    @Option(help: "How long to send traffic, in seconds.")
    var duration: Double = 30

    @Option(help: "Requests per second.")
    var rate: Double = 40

    @Option(help: "Comma-separated modules to exercise (catalog, checkout, accounts).")
    var modules: String = "catalog,checkout,accounts"

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
            configuration = loaded
        } catch {
            throw ValidationError("configuration: \(error)")
        }
        let agent = try APIHealthAgent(configuration: configuration, logger: logger)
        // Every swift-metrics Counter, Meter and Timer of this process goes out through the agent too.
        MetricsSystem.bootstrap(APIHealthMetricsFactory(agent: agent))
        let server = try await LoopbackHTTPServer.start(threads: 2, handler: DemoAPI.handle)
        let counters = DemoCounters()
        let traffic = DemoTraffic(
            agent: agent, baseURL: server.baseURL, modules: moduleList, rate: rate, duration: .seconds(duration),
            counters: counters, logger: logger)
        let destination = configuration.destination.map { $0.redactedURL } ?? "nowhere (pending in the spool)"
        print("apihealth-demo: local API at \(server.baseURL), shipping to \(destination)")
        let progress = Task { await showProgress(counters: counters, agent: agent) }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(service: agent),
                    .init(service: traffic, successTerminationBehavior: .gracefullyShutdownGroup),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        progress.cancel()
        try await server.shutdown()
        printSummary(counters: counters, agent: agent, configuration: configuration)
    }

    private func showProgress(counters: DemoCounters, agent: APIHealthAgent) async {
        guard isatty(STDOUT_FILENO) == 1 else { return }
        let start = ContinuousClock.now
        while !Task.isCancelled {
            let seen = counters.snapshot
            let metrics = agent.metrics
            let elapsed = (ContinuousClock.now - start).components.seconds
            let line = "\r\(elapsed)s  requests \(seen.requests)  errors \(seen.errors)  parse failures \(seen.parseFailures)"
                + "  written \(metrics.pointsWritten)  pending \(metrics.pendingLines)  dropped \(metrics.pointsDropped)   "
            FileHandle.standardOutput.write(Data(line.utf8))
            try? await Task.sleep(for: .milliseconds(250))
        }
        FileHandle.standardOutput.write(Data("\n".utf8))
    }

    private func printSummary(counters: DemoCounters, agent: APIHealthAgent, configuration: APIHealthConfiguration) {
        let seen = counters.snapshot
        let metrics = agent.metrics
        print("""
            apihealth-demo summary
              requests         \(seen.requests)
              errors           \(seen.errors)
              parse failures   \(seen.parseFailures)
              points written   \(metrics.pointsWritten)
              points pending   \(metrics.pendingLines)
              points dropped   \(metrics.pointsDropped)
              points rejected  \(metrics.pointsRejected)
            """)
        if let spool = configuration.spool, metrics.pendingLines > 0 {
            print("Pending lines are in \(spool.directory.path). Look at them with:")
            print("  swift run influx-tail --spool '\(spool.directory.path)' --format table -n 20")
            print("  swift run influx-tail --spool '\(spool.directory.path)' --stats")
        }
    }
}
