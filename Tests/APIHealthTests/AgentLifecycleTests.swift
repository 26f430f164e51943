import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import APIHealthTestKit
import ServiceLifecycle
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

/// A service that returns as soon as it runs, so that its group shuts down gracefully: the agent beside
/// it is asked to stop whether its `run()` has begun or not, and handles both.
private struct StopsAtOnce: Service {
    func run() async throws {}
}

@Suite(.serialized) struct AgentLifecycleTests {
    private func makeAgent(spool: URL?, destination: InfluxDestination? = nil) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "lifecycle", destination: destination)
        configuration.spool = spool.map { SpoolOptions(directory: $0) }
        configuration.shutdownDeadline = .seconds(2)
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "lifecycle"))
    }

    /// The cheap reading lines are stamped with keeps to the clock the agent schedules with, within
    /// the coarse clock's tick, and never goes backwards.
    @Test func theCoarseClockKeepsToTheClock() async throws {
        let clock = SystemAgentClock()
        // The coarse clock moves once a tick: it is up to a tick behind the time it is read at.
        #if os(Linux)
        var resolution = timespec()
        try #require(clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) == 0)
        let tick = Duration.seconds(resolution.tv_sec) + .nanoseconds(resolution.tv_nsec)
        #else
        let tick = Duration.zero  // coarseNow is now itself
        #endif
        var last = clock.coarseNow
        for _ in 0..<100 {
            // Read between two readings of the fine clock, so a thread that is preempted between the
            // readings (a loaded machine) does not count against the coarse one.
            let before = clock.now
            let coarse = clock.coarseNow
            let after = clock.now
            #expect(coarse >= last)
            #expect(
                coarse - after <= .milliseconds(20) && before - coarse <= .milliseconds(20),
                "coarse \(coarse), fine \(before) … \(after)"
            )
            last = coarse
            try await Task.sleep(for: .milliseconds(2))  // time must pass for the clocks to be compared
        }
        let end = clock.coarseNow
        #expect(end >= last)
        #expect(end + tick >= .milliseconds(200), "100 sleeps of 2 ms: \(end), the coarse clock's tick \(tick)")
    }

    @Test func aSecondRunIsAnError() async throws {
        let agent = try makeAgent(spool: nil)
        agent.start()
        await #expect(throws: APIHealthAgent.LifecycleError.self) { try await agent.run() }
        await agent.shutdown()
        await #expect(throws: APIHealthAgent.LifecycleError.self) { try await agent.run() }
    }

    @Test func onShutdownBodiesRunOnceBeforeIntakeClosesAndLateOnesNever() async throws {
        let agent = try makeAgent(spool: nil)
        let runs = Locked([String]())
        agent.onShutdown {
            runs.withLock { $0.append("first") }
            #expect(
                agent.write(Point(measurement: "last_words", fields: [Point.Field("n", .int(1))])),
                "intake still open"
            )
        }
        agent.onShutdown { runs.withLock { $0.append("second") } }
        agent.start()
        await agent.shutdown()
        await agent.shutdown()
        agent.onShutdown { runs.withLock { $0.append("late") } }
        await agent.shutdown()
        #expect(runs.withLock { $0 } == ["first", "second"])
        #expect(agent.metrics.pointsDropped == 0 && agent.metrics.pointsRecorded >= 1)
    }

    @Test func runReturnsOnlyOnceTheSpoolIsReleased() async throws {
        let spool = temporaryDirectory("lifecycle")
        defer { try? FileManager.default.removeItem(at: spool) }
        for round in 0..<5 {
            let agent = try makeAgent(spool: spool)
            agent.write(Point(measurement: "round", fields: [Point.Field("n", .int(Int64(round)))]))
            let group = ServiceGroup(
                configuration: ServiceGroupConfiguration(
                    services: [
                        .init(service: agent),
                        .init(
                            service: StopsAtOnce(),
                            successTerminationBehavior: .gracefullyShutdownGroup
                        ),
                    ],
                    logger: Logger(label: "lifecycle")
                )
            )
            try await group.run()
            // The spool is free the moment run() has returned: the next agent takes it over.
            let next = try makeAgent(spool: spool)
            #expect(next.metrics.pendingLines >= round + 1, "\(round): the points of every round are kept")
            await next.shutdown()
        }
    }

    /// `APIHEALTH_ENABLED=0` gives an agent that can stand in for the enabled one anywhere: it runs and
    /// shuts down, takes points and samples, and leaves no spool, no warning and no lost point behind,
    /// whether a spool directory is set or not.
    @Test func aDisabledAgentKeepsNoSpoolWarnsOfNothingAndLosesNothing() async throws {
        let spool = temporaryDirectory("disabled").appendingPathComponent("spool")
        let label = "disabled-\(UUID().uuidString)"
        for directory in [spool.path, "none"] {
            let configuration = try APIHealthConfiguration.fromEnvironment(
                ["APIHEALTH_ENABLED": "0", "APIHEALTH_SPOOL_DIR": directory],
                serviceName: "disabled"
            )
            let agent = try APIHealthAgent(
                configuration: configuration,
                logger: Logger(label: label, factory: { CollectingLogHandler(label: $0) })
            )
            agent.start()
            agent.write(Point(measurement: "m", fields: ["v": 1]))
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://api.example.com/x")!,
                    module: "m",
                    startedAt: Date(),
                    duration: .milliseconds(1)
                )
            )
            await agent.shutdown()
            let metrics = agent.metrics
            #expect(metrics.pointsRecorded == 0, "\(directory)")
            #expect(metrics.pendingLines == 0, "\(directory)")
            #expect(metrics.pointsLost == 0 && metrics.pointsDropped == 0, "\(directory)")
        }
        #expect(!FileManager.default.fileExists(atPath: spool.path), "no spool directory is made")
        let logs = CollectingLogHandler.messages.withLock { $0.filter { $0.hasPrefix(label) } }
        #expect(logs.isEmpty, "\(logs)")
    }

    /// Lines reach the spool on the configured beat: a point recorded after a round stays in memory until
    /// the next, a beat later on the spool worker's clock, or until shutdown writes it, at once. The test
    /// moves that clock itself and is told when the worker waits for it (no sleep, no poll).
    @Test func linesReachTheSpoolOnTheConfiguredWriteThroughInterval() async throws {
        let beat = Duration.seconds(3_600)
        let spool = temporaryDirectory("write-through")
        defer { try? FileManager.default.removeItem(at: spool) }
        var configuration = APIHealthConfiguration(serviceName: "write-through")
        configuration.spool = SpoolOptions(directory: spool, writeThroughInterval: beat)
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // On a manual clock that stays put, no batch is sealed by its age: only a spool worker round
        // writes a line through.
        let spoolClock = ManualClock()
        let agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: "write-through"),
            clock: ManualClock(),
            spoolClock: spoolClock
        )
        func spooled() -> [String] {
            ((try? SpoolReader(directory: spool).segments()) ?? []).flatMap(\.lines).map {
                String(decoding: $0, as: UTF8.self)
            }
        }
        // Loading the spool at init asks the spool worker for a round, and that wake-up is kept until it
        // waits: a second round would follow the first at once. Dropped here, so the first round is the
        // only one before the beat.
        agent.pending.filled.dropKeptSignal()
        agent.write(Point(measurement: "first", fields: ["v": 1]))
        agent.start()
        // The first round, at start, writes what was recorded before it, then waits a beat.
        #expect(await spoolClock.waitForSleeper(until: beat))
        #expect(spooled().contains { $0.hasPrefix("first ") })
        agent.write(Point(measurement: "second", fields: ["v": 2]))
        #expect(!spooled().contains { $0.hasPrefix("second ") }, "not written through before the next round")
        // A beat later, the next round writes it, then waits for the beat after.
        spoolClock.advance(by: beat)
        #expect(await spoolClock.waitForSleeper(until: beat * 2))
        #expect(spooled().contains { $0.hasPrefix("second ") }, "written through on the beat")
        agent.write(Point(measurement: "third", fields: ["v": 3]))
        // Closing intake wakes the spool worker for its last round: shutdown neither waits out the beat
        // (the clock is not moved again) nor its own deadline (an hour).
        #expect(
            await finishes { await agent.shutdown(deadline: .seconds(3_600)) } != nil,
            "shutdown waited for the beat"
        )
        #expect(spooled().contains { $0.hasPrefix("third ") }, "written at shutdown")
    }

    /// `writeThrough()` returns once what its caller wrote is in the spool's files: written by the caller
    /// before the agent runs, by a round of the spool worker asked for while it runs (its own beat is an
    /// hour on a clock that stays put), at once after it stopped. Callers on many tasks at once each
    /// find their own lines on disk; no line is written twice.
    @Test func writeThroughReturnsOnceTheCallersLinesAreInTheSpool() async throws {
        let spool = temporaryDirectory("asked-write-through")
        defer { try? FileManager.default.removeItem(at: spool) }
        var configuration = APIHealthConfiguration(serviceName: "asked-write-through")
        configuration.spool = SpoolOptions(directory: spool, writeThroughInterval: .seconds(3_600))
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: "asked-write-through"),
            clock: ManualClock(),
            spoolClock: ManualClock()
        )
        func spooled(_ measurement: String) -> Int {
            ((try? SpoolReader(directory: spool).segments()) ?? []).flatMap(\.lines)
                .filter { $0.starts(with: Array("\(measurement) ".utf8)) }.count
        }
        agent.write(Point(measurement: "before", fields: ["v": 1]))
        await agent.writeThrough()
        #expect(spooled("before") == 1, "written by the caller: no worker yet")

        agent.start()
        let callers = 16
        let found = await withTaskGroup(of: Int.self) { group in
            for caller in 0..<callers {
                group.addTask {
                    for line in 0..<5 {
                        agent.write(Point(measurement: "caller\(caller)", fields: ["v": .int(Int64(line))]))
                    }
                    await agent.writeThrough()
                    return spooled("caller\(caller)")
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(found == Array(repeating: 5, count: callers), "each caller's 5 lines, once each")

        await agent.shutdown(deadline: .seconds(5))
        #expect(await finishes { await agent.writeThrough() } != nil, "at once after the agent stopped")
    }

    @Test func aCleanShutdownDropsNothing() async throws {
        let server = try await LoopbackHTTPServer.start { _ in
            LoopbackHTTPServer.Response(status: 204, delay: .milliseconds(30))
        }
        let spool = temporaryDirectory("lifecycle")
        defer { try? FileManager.default.removeItem(at: spool) }
        var configuration = APIHealthConfiguration(
            serviceName: "lifecycle",
            destination: InfluxDestination(url: URL(string: server.baseURL)!, api: .v1(database: "x"))
        )
        configuration.spool = SpoolOptions(directory: spool)
        configuration.selfMetricsInterval = .milliseconds(1)
        configuration.batching.maximumLines = 10
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "lifecycle"))
        agent.start()
        for index in 0..<500 {
            agent.write(Point(measurement: "drain", fields: [Point.Field("n", .int(Int64(index)))]))
        }
        await agent.shutdown(deadline: .seconds(60))
        let metrics = agent.metrics
        #expect(metrics.pointsDropped == 0)
        #expect(metrics.pendingLines == 0)
        #expect(metrics.pointsWritten >= 501)
        try await server.shutdown()
    }
}
