import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

/// Collects what the agent logs, with the level, for the warnings a user must see once.
final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    let entries = Locked([(level: Logger.Level, message: String, metadata: Logger.Metadata)]())
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        entries.withLock {
            $0.append((event.level, "\(event.message)", metadata.merging(event.metadata ?? [:]) { $1 }))
        }
    }

    func warnings(containing text: String) -> [(message: String, metadata: Logger.Metadata)] {
        entries.withLock { entries in
            entries.filter { $0.level == .warning && $0.message.contains(text) }.map { ($0.message, $0.metadata) }
        }
    }
}

/// Several write endpoints, against real VictoriaMetrics, vmauth, vmagent and InfluxDB 1.x processes:
/// a failover group, fan-out to independent destinations, base paths, losses a user is told about,
/// and recovery after an outage.
@Suite(.serialized) struct DestinationsTests {
    /// A point numbered `index` of run `run`, one millisecond after the one before (VictoriaMetrics
    /// keeps milliseconds).
    static func point(_ index: Int, run: String, measurement: String = "fleet") -> Point {
        Point(
            measurement: measurement,
            tags: [Point.Tag("run", run)],
            fields: [Point.Field("seq", .int(Int64(index)))],
            timestamp: Timestamp(nanosecondsSinceEpoch: 1_763_800_000_000_000_000 + Int64(index) * 1_000_000)
        )
    }

    /// The `seq` values stored for `run` on the VictoriaMetrics at `base`.
    static func stored(_ run: String, at base: URL, measurement: String = "fleet") async throws -> [Int] {
        let victoria = VictoriaMetrics(base: base)
        let series = try await victoria.export(namePattern: "\(measurement)_seq")
        return series.filter { $0.labels["run"] == run }.flatMap(\.values).map { Int($0) }
    }

    /// How long to wait for real servers to store and show what they were sent (a loaded machine is
    /// slow, never wrong).
    static let serverTimeout: Duration = .seconds(120)

    static func configuration(_ name: String, destinations: [InfluxDestination]) -> APIHealthConfiguration {
        var configuration = APIHealthConfiguration(serviceName: name)
        configuration.destinations = destinations
        configuration.spool = SpoolOptions(directory: temporaryDirectory(name))
        configuration.batching.flushDelay = .milliseconds(50)
        configuration.batching.maximumLines = 250
        configuration.retry.initialDelay = .milliseconds(200)
        configuration.retry.maximumDelay = .seconds(2)
        configuration.retry.maximumReconnectDelay = .milliseconds(500)
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        return configuration
    }

    @Test func aFailoverGroupOfThreeStoresEveryPointOnceWhileOneIsStoppedAndStartedAgain() async throws {
        let servers = [
            try await VictoriaProcess.victoriaMetrics(), try await VictoriaProcess.victoriaMetrics(),
            try await VictoriaProcess.victoriaMetrics(),
        ]
        let run = UUID().uuidString
        let configuration = Self.configuration(
            "failover",
            destinations: [InfluxDestination(urls: servers.map(\.url), api: .v2(organization: "o", bucket: "b"))]
        )
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "failover"))
        agent.start()
        func stored() async throws -> [Int] {
            var all: [Int] = []
            for server in servers { all += try await Self.stored(run, at: server.url) }
            return all
        }
        // A third, then stop the server that took them.
        for index in 0..<1_000 { agent.write(Self.point(index, run: run)) }
        #expect(await agent.flush(waitingUpTo: .seconds(120)))
        var inUse: VictoriaProcess?
        for server in servers where try await !Self.stored(run, at: server.url).isEmpty { inUse = server }
        let stopped = try #require(inUse, "one server took the first third")
        stopped.stop()
        // A third while it is away: the group moves on.
        for index in 1_000..<2_000 { agent.write(Self.point(index, run: run)) }
        #expect(await agent.flush(waitingUpTo: .seconds(120)))
        try await stopped.start()
        for index in 2_000..<3_000 { agent.write(Self.point(index, run: run)) }
        await agent.shutdown(deadline: .seconds(120))
        // With the agent's last health point.
        #expect(agent.metrics.pointsWritten == 3_001 && agent.metrics.pendingLines == 0)
        var all: [Int] = []
        _ = try await waitUntil(timeout: Self.serverTimeout) {
            all = try await stored()
            return all.count >= 3_000
        }
        #expect(all.count == 3_000, "every point stored once across the three")
        #expect(Set(all) == Set(0..<3_000))
        #expect(agent.metrics.retries >= 1, "the stopped server was tried and left")
    }

    @Test func aLiveDestinationGetsEverythingWhileAnotherIsDownAndTheDeadOnesBacklogFollowsOnce() async throws {
        let live = try await VictoriaProcess.victoriaMetrics()
        let late = try await VictoriaProcess.victoriaMetrics()
        late.stop()
        let run = UUID().uuidString
        var configuration = Self.configuration(
            "fanout",
            destinations: [
                InfluxDestination(url: live.url, api: .v2(organization: "o", bucket: "b")),
                InfluxDestination(url: late.url, api: .v1(database: "apihealth")),
            ]
        )
        configuration.destinations[1].name = "late"
        // The same points to the live destination alone, for the delivery delay to compare with.
        let alone = try APIHealthAgent(
            configuration: Self.configuration("alone", destinations: [configuration.destinations[0]]),
            logger: Logger(label: "alone")
        )
        alone.start()
        let aloneRun = UUID().uuidString
        let aloneStarted = ContinuousClock.now
        for index in 0..<3_000 { alone.write(Self.point(index, run: aloneRun)) }
        #expect(
            try await waitUntil(timeout: Self.serverTimeout) {
                try await Self.stored(aloneRun, at: live.url).count >= 3_000
            }
        )
        let aloneDelay = ContinuousClock.now - aloneStarted
        await alone.shutdown(deadline: .seconds(30))
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "fanout"))
        agent.start()
        let started = ContinuousClock.now
        for index in 0..<3_000 { agent.write(Self.point(index, run: run)) }
        var liveStored: [Int] = []
        #expect(
            try await waitUntil(timeout: Self.serverTimeout) {
                liveStored = try await Self.stored(run, at: live.url)
                return liveStored.count >= 3_000
            },
            "the live destination gets everything while the other is down"
        )
        let delay = ContinuousClock.now - started
        #expect(liveStored.count == 3_000 && Set(liveStored).count == 3_000)
        let metrics = agent.metrics
        #expect(metrics.destinations.count == 2)
        #expect(metrics.destinations[0].pointsWritten == 3_000 && metrics.destinations[0].pendingLines == 0)
        #expect(metrics.destinations[1].pendingLines == 3_000 && metrics.destinations[1].pointsDropped == 0)
        print(
            "fan-out: the live destination had all 3,000 points \(delay) after the first was recorded (alone: \(aloneDelay))"
        )
        #expect(delay < aloneDelay + .seconds(5), "a dead destination does not hold the live one back")
        try await late.start()
        var lateStored: [Int] = []
        #expect(
            try await waitUntil(timeout: Self.serverTimeout) {
                lateStored = try await Self.stored(run, at: late.url)
                return lateStored.count >= 3_000
            },
            "the backlog follows once the destination is back"
        )
        await agent.shutdown(deadline: .seconds(60))
        #expect(lateStored.count == 3_000 && Set(lateStored) == Set(0..<3_000), "exactly once")
        #expect(try await Self.stored(run, at: live.url).count == 3_000, "nothing sent twice to the live one")
    }

    @Test func aDeadDestinationsBacklogStaysWithinItsOwnCapAndNeverDropsTheLiveOnesPoints() async throws {
        let live = try await VictoriaProcess.victoriaMetrics()
        let dead = try RefusingPort()
        let run = UUID().uuidString
        var configuration = Self.configuration(
            "fanout-cap",
            destinations: [
                InfluxDestination(url: live.url, api: .v2(organization: "o", bucket: "b")),
                InfluxDestination(
                    url: dead.url,
                    api: .v2(organization: "o", bucket: "b")
                ),
            ]
        )
        configuration.destinations[1].maximumPendingBytes = 64 << 10
        configuration.batching.maximumBytes = 8 << 10
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "fanout-cap"))
        agent.start()
        for index in 0..<5_000 { agent.write(Self.point(index, run: run)) }
        var liveStored: [Int] = []
        #expect(
            try await waitUntil(timeout: Self.serverTimeout) {
                liveStored = try await Self.stored(run, at: live.url)
                return liveStored.count >= 5_000
            }
        )
        #expect(Set(liveStored) == Set(0..<5_000), "the live destination loses nothing to the dead one's cap")
        let backlog = agent.metrics.destinations[1]
        #expect(backlog.pointsDropped > 0 && backlog.pendingBytes <= (64 << 10) + (8 << 10))
        #expect(UInt64(backlog.pendingLines) + backlog.pointsDropped == 5_000)
        await agent.shutdown(deadline: .milliseconds(500))
    }

    @Test func aBasePathIsKeptThroughVMAuthInFrontOfTwoStoresForV1AndV2() async throws {
        let first = try await VictoriaProcess.victoriaMetrics()
        let second = try await VictoriaProcess.victoriaMetrics()
        // vmauth balances over both, passing the path on: /influx/api/v2/write and /influx/write are
        // VictoriaMetrics' own paths under the base path /influx. It takes a bearer token, sent as a
        // custom header.
        let proxy = try await VictoriaProcess.vmauth(
            config: """
                users:
                - bearer_token: "fleet-secret"
                  url_prefix: ["\(first.url.absoluteString)", "\(second.url.absoluteString)"]
                """
        )
        for api in [InfluxDestination.WriteAPI.v2(organization: "o", bucket: "b"), .v1(database: "apihealth")] {
            let run = UUID().uuidString
            var destination = InfluxDestination(url: proxy.url.appendingPathComponent("influx"), api: api)
            destination.name = "cluster"
            destination.headers = ["Authorization": "Bearer fleet-secret"]
            #expect(destination.writeURL(precision: .ns).path.hasPrefix("/influx/"))
            let agent = try APIHealthAgent(
                configuration: Self.configuration("vmauth", destinations: [destination]),
                logger: Logger(label: "vmauth")
            )
            agent.start()
            for index in 0..<2_000 { agent.write(Self.point(index, run: run)) }
            await agent.shutdown(deadline: .seconds(60))
            #expect(agent.metrics.pointsWritten == 2_001 && agent.metrics.pendingLines == 0, "\(api)")
            var all: [Int] = []
            _ = try await waitUntil(timeout: Self.serverTimeout) {
                all = try await Self.stored(run, at: first.url) + Self.stored(run, at: second.url)
                return all.count >= 2_000
            }
            #expect(all.count == 2_000 && Set(all) == Set(0..<2_000), "\(api): every point once across both")
        }
    }

    @Test func vmagentRelaysWhatTheAgentWrites() async throws {
        let store = try await VictoriaProcess.victoriaMetrics()
        let relay = try await VictoriaProcess.vmagent(remoteWrite: store.url.appendingPathComponent("api/v1/write"))
        let run = UUID().uuidString
        let agent = try APIHealthAgent(
            configuration: Self.configuration(
                "vmagent",
                destinations: [
                    InfluxDestination(url: relay.url, api: .v2(organization: "o", bucket: "b"))
                ]
            ),
            logger: Logger(label: "vmagent")
        )
        agent.start()
        for index in 0..<2_000 { agent.write(Self.point(index, run: run)) }
        await agent.shutdown(deadline: .seconds(60))
        #expect(agent.metrics.pointsWritten == 2_001 && agent.metrics.pendingLines == 0)
        var stored: [Int] = []
        #expect(
            try await waitUntil(timeout: Self.serverTimeout) {
                stored = try await Self.stored(run, at: store.url)
                return stored.count >= 2_000
            }
        )
        #expect(Set(stored) == Set(0..<2_000) && stored.count == 2_000)
    }

    @Test func aMisconfiguredDatabaseIsWarnedOnceAndItsLossesAreCounted() async throws {
        // InfluxDB 1.x answers 404 for a database that does not exist.
        let influx = try TestServers.influxDB1()
        let logs = RecordingLogHandler()
        var configuration = Self.configuration(
            "misconfigured",
            destinations: [
                InfluxDestination(url: influx, api: .v1(database: "missing_\(UInt32.random(in: 0...UInt32.max))"))
            ]
        )
        configuration.batching.maximumBytes = 4 << 10
        configuration.batching.maximumPendingBytes = 16 << 10
        let agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: "misconfigured") { _ in logs }
        )
        agent.start()
        let run = UUID().uuidString
        for index in 0..<2_000 {
            agent.write(Self.point(index, run: run))
            if index % 200 == 0 { agent.flush() }
        }
        #expect(
            await waitUntil(timeout: Self.serverTimeout) {
                !logs.warnings(containing: "refused the agent's credentials").isEmpty
                    && !logs.warnings(containing: "dropping points").isEmpty
            }
        )
        for index in 2_000..<4_000 { agent.write(Self.point(index, run: run)) }
        await agent.shutdown(deadline: .milliseconds(500))
        let refused = logs.warnings(containing: "refused the agent's credentials")
        #expect(refused.count == 1, "the 404 is warned once")
        #expect(refused.first?.metadata["apihealth.status"] == "404")
        let dropping = logs.warnings(containing: "dropping points")
        #expect(dropping.count == 1, "the first drop is warned once")
        #expect(Int(dropping.first?.metadata["apihealth.points.dropped"]?.description ?? "") ?? 0 > 0, "with the count")
        let summary = logs.warnings(containing: "some points were not delivered")
        #expect(summary.count == 1, "and summarised at shutdown")
        #expect(summary.first?.metadata["apihealth.points.dropped"]?.description == "\(agent.metrics.pointsDropped)")
    }

    @Test func aProducerRecordingAfterTheAgentStoppedIsWarnedOnce() async throws {
        let logs = RecordingLogHandler()
        var configuration = APIHealthConfiguration(serviceName: "order")
        configuration.spool = nil
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "order") { _ in logs })
        agent.start()
        await agent.shutdown(deadline: .seconds(5))
        for index in 0..<10 { agent.write(Self.point(index, run: "late")) }
        let warnings = logs.warnings(containing: "stopped before a service that still records")
        #expect(warnings.count == 1)
        #expect(agent.metrics.pointsDropped == 10)
    }

    @Test func deliveryResumesWithinFiveSecondsOfTheServersReturn() async throws {
        let server = try await VictoriaProcess.victoriaMetrics()
        let run = UUID().uuidString
        var configuration = Self.configuration(
            "recovery",
            destinations: [InfluxDestination(url: server.url, api: .v2(organization: "o", bucket: "b"))]
        )
        // The defaults a user has: a backoff that grows to minutes, a reconnect probe every 4 s at most.
        configuration.retry = RetryPolicy()
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "recovery"))
        agent.start()
        server.stop()
        // A 20 s outage: the backoff grows past 5 s (5 s, 10 s, 20 s …).
        let outageEnds = ContinuousClock.now + .seconds(20)
        var index = 0
        while ContinuousClock.now < outageEnds {
            agent.write(Self.point(index, run: run))
            index += 1
            try await Task.sleep(for: .milliseconds(20))  // paces the traffic through the outage; no check waits on it
        }
        #expect(agent.metrics.retries >= 3)
        try await server.start()
        let back = ContinuousClock.now
        #expect(
            try await waitUntil(timeout: Self.serverTimeout) { try await Self.stored(run, at: server.url).count >= 1 },
            "delivery resumes"
        )
        let resumed = ContinuousClock.now - back
        print("recovery: the first point was stored \(resumed) after the server was back")
        #expect(
            resumed < .seconds(5) + .seconds(10),
            "within the reconnect delay (4 s), with room for a loaded machine"
        )
        await agent.shutdown(deadline: .seconds(30))
        #expect(try await Self.stored(run, at: server.url).count == index)
    }
}
