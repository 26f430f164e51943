import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealthRelay
@_spi(Benchmarking) @_spi(Package) @testable import APIHealth

/// The intake without sockets: a request in, the answer InfluxDB would give out, and what reaches the
/// agent.
@Suite struct IntakeTests {
    static let key = "k3y-shop"

    static func intake(
        _ configure: (inout RelayConfiguration) -> Void = { _ in }
    ) throws -> (RelayIntake, APIHealthAgent) {
        var configuration = RelayConfiguration(keys: try AppKeys(parsing: "\(key)=shop-ios:prod"))
        configure(&configuration)
        var agentConfiguration = APIHealthConfiguration(serviceName: "apihealth-relay")
        agentConfiguration.spool = nil
        agentConfiguration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: agentConfiguration, logger: Logger(label: "relay"))
        return (RelayIntake(configuration: configuration, agent: agent), agent)
    }

    static func lines(
        _ count: Int,
        path: String = "/cart",
        at base: Int64 = Timestamp.systemNow().nanosecondsSinceEpoch
    ) -> String {
        (0..<count).map {
            "apihealth_request_interval,host=api.shop.example,path=\(path),service=shop-ios,status_class=2xx count=1i \(base + Int64($0))\n"
        }.joined()
    }

    static func request(
        _ body: String,
        key: String? = IntakeTests.key,
        client: String = "203.0.113.9",
        gzip: Bool = false
    ) -> IntakeRequest {
        IntakeRequest(
            authorization: key.map { "Token \($0)" },
            contentEncoding: gzip ? "gzip" : nil,
            client: client,
            body: gzip ? try! Gzip.compress(Array(body.utf8)) : Array(body.utf8)
        )
    }

    @Test func takesEveryLineOfAnHonestWriteAndKeepsItsTimestamps() async throws {
        let (intake, agent) = try Self.intake()
        let body = Self.lines(5)
        #expect(await intake.handle(Self.request(body, gzip: true)) == .taken)
        // The same write again (an install retrying): the same instants, so the database keeps one of each.
        #expect(await intake.handle(Self.request(body)) == .taken)
        let points = agent.pendingPoints()
        #expect(points.count == 10)
        #expect(Set(points.map(\.timestamp)).count == 5)
        #expect(points.allSatisfy { $0.tag("env") == "prod" })
        #expect(intake.counters.linesAccepted == 10)
    }

    @Test func aWrongOrMissingKeyIs401AndNothingIsTaken() async throws {
        let (intake, agent) = try Self.intake()
        for key in ["wrong", nil] as [String?] {
            let answer = await intake.handle(Self.request(Self.lines(3), key: key))
            #expect(answer.status == 401)
        }
        var bearer = Self.request(Self.lines(1))
        bearer.authorization = "Bearer \(Self.key)"
        #expect(await intake.handle(bearer) == .taken)
        var v1 = Self.request(Self.lines(1))
        v1.authorization = nil
        v1.password = Self.key
        #expect(await intake.handle(v1) == .taken)
        #expect(agent.pendingPoints().count == 2)
        #expect(intake.counters.refused[.key] == 2)
    }

    @Test func aBodyOverTheLimitIs413AsReceivedOrAfterGzip() async throws {
        let (intake, agent) = try Self.intake { $0.maximumBodyBytes = 64 << 10 }
        let large = String(repeating: "#", count: 65 << 10)
        #expect(await intake.handle(Self.request(large)).status == 413)
        // 8 MiB that gzip to a few KiB: refused once the inflated bytes pass the limit.
        let bomb = String(repeating: "a", count: 8 << 20)
        let compressed = Self.request(bomb, gzip: true)
        #expect(compressed.body.count < 64 << 10)
        #expect(await intake.handle(compressed).status == 413)
        #expect(
            await intake.handle(
                IntakeRequest(
                    authorization: "Token \(Self.key)",
                    contentEncoding: "gzip",
                    client: "c",
                    body: [1, 2, 3]
                )
            ).status == 400
        )
        #expect(agent.pendingPoints().isEmpty)
        #expect(intake.counters.refused[.bodyTooLarge] == 2)
    }

    @Test func refusedLinesAreNamedAsInfluxDB3NamesThemAndTheAgentReadsThem() async throws {
        let (intake, agent) = try Self.intake()
        let now = Timestamp.systemNow().nanosecondsSinceEpoch
        let body = [
            "apihealth_request_interval,service=shop-ios count=1i \(now)",
            "cpu,service=shop-ios usage=1 \(now)",
            "",
            "apihealth_request_interval,service=shop-ios count=2i \(now + 365 * 86_400 * 1_000_000_000)",
            "not line protocol",
            "apihealth_request_interval,service=shop-ios count=3i \(now + 1)",
        ].joined(separator: "\n")
        let answer = await intake.handle(Self.request(body))
        #expect(answer.status == 400)
        let outcome = WriteOutcome.classify(status: answer.status, headers: [:], body: Data(answer.body))
        guard case .partial(let refused) = outcome else {
            Issue.record("not a partial write: \(outcome)")
            return
        }
        #expect(refused.keys.sorted() == [2, 4, 5])
        #expect(refused[2]?.hasPrefix("measurement") == true)
        #expect(refused[4]?.hasPrefix("timestamp") == true)
        #expect(refused[5]?.hasPrefix("unparsable") == true)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("dropped=3"))
        #expect(agent.pendingPoints().map { $0.field("count") } == [.int(1), .int(3)])
        let counters = intake.counters
        #expect(counters.linesAccepted == 2)
        #expect(counters.refused == [.measurement: 1, .timestamp: 1, .unparsable: 1])
    }

    @Test func overTheClientsRateIs429WithRetryAfterAndOtherClientsGoOn() async throws {
        let clock = ManualClock()
        var configuration = RelayConfiguration(keys: try AppKeys(parsing: "\(Self.key)=shop-ios"))
        configuration.clientLinesPerMinute = 60
        let agent = try APIHealthAgent(
            configuration: {
                var agentConfiguration = APIHealthConfiguration(serviceName: "apihealth-relay")
                agentConfiguration.spool = nil
                return agentConfiguration
            }(),
            logger: Logger(label: "relay")
        )
        let intake = RelayIntake(configuration: configuration, agent: agent, clock: clock)
        #expect(await intake.handle(Self.request(Self.lines(60))) == .taken)
        let throttled = await intake.handle(Self.request(Self.lines(30)))
        #expect(throttled.status == 429)
        #expect(throttled.headers["Retry-After"] == "30")
        #expect(await intake.handle(Self.request(Self.lines(30), client: "198.51.100.7")) == .taken)
        clock.advance(by: .seconds(30))
        #expect(await intake.handle(Self.request(Self.lines(30))) == .taken)
        #expect(agent.pendingPoints().count == 120)
        #expect(intake.counters.requestsThrottled == 1)
        #expect(intake.counters.refused[.throttled] == 30)
    }

    @Test func overTheKeysRateIs429ForEveryClient() async throws {
        let (intake, _) = try Self.intake { $0.keyLinesPerMinute = 100 }
        #expect(await intake.handle(Self.request(Self.lines(100), client: "a")) == .taken)
        let answer = await intake.handle(Self.request(Self.lines(10), client: "b"))
        #expect(answer.status == 429)
        #expect(answer.headers["Retry-After"].flatMap { Int($0) }.map { $0 >= 1 && $0 <= 60 } == true)
    }

    @Test func newSeriesPastTheKeysHourlyBudgetAreRefusedKnownOnesTaken() async throws {
        let (intake, agent) = try Self.intake { $0.newSeriesPerHour = 10 }
        let body = (0..<25).map { "apihealth_request_interval,path=/p\($0),service=shop-ios count=1i" }.joined(
            separator: "\n"
        )
        let answer = await intake.handle(Self.request(body))
        guard
            case .partial(let refused) = WriteOutcome.classify(
                status: answer.status,
                headers: [:],
                body: Data(answer.body)
            )
        else {
            Issue.record("not a partial write")
            return
        }
        #expect(refused.keys.sorted() == Array(11...25))
        #expect(
            await intake.handle(Self.request("apihealth_request_interval,path=/p3,service=shop-ios count=2i")) == .taken
        )
        #expect(agent.pendingPoints().count == 11)
        #expect(intake.counters.refused[.seriesLimit] == 15)
    }

    /// The answer comes once the lines taken are in the spool's files: before the agent runs (the caller
    /// writes them), and while it runs (the spool worker's round, asked for; its own beat here is an
    /// hour, so nothing else writes them); after the agent stopped, at once.
    @Test func anAnswerComesOnceTheLinesTakenAreInTheSpool() async throws {
        let directory = temporaryDirectory("relay-spool").appendingPathComponent("spool")
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        var agentConfiguration = APIHealthConfiguration(serviceName: "apihealth-relay")
        agentConfiguration.spool = SpoolOptions(directory: directory, writeThroughInterval: .seconds(3_600))
        agentConfiguration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: agentConfiguration, logger: Logger(label: "relay"))
        let intake = RelayIntake(
            configuration: RelayConfiguration(keys: try AppKeys(parsing: "\(Self.key)=shop-ios:prod")),
            agent: agent
        )
        func linesOnDisk(_ path: String) throws -> Int {
            try SpoolReader(directory: directory).segments().flatMap(\.lines)
                .filter { String(decoding: $0, as: UTF8.self).contains("path=\(path),") }.count
        }

        #expect(await intake.handle(Self.request(Self.lines(3, path: "/before"))) == .taken)
        #expect(try linesOnDisk("/before") == 3, "written by the caller: no worker yet")

        agent.start()
        // The worker's first round, then an hour's wait: only a round asked for writes what comes next.
        #expect(await intake.handle(Self.request(Self.lines(4, path: "/running"))) == .taken)
        #expect(try linesOnDisk("/running") == 4, "written by the worker's round, asked for")
        #expect(await intake.handle(Self.request(Self.lines(5, path: "/again"))) == .taken)
        #expect(try linesOnDisk("/again") == 5)

        await agent.shutdown(deadline: .milliseconds(100))
        let after = await intake.handle(Self.request(Self.lines(2, path: "/after")))
        #expect(after.status != 204, "intake has closed: \(after)")
        #expect(try linesOnDisk("/after") == 0)
    }

    @Test func theLimitsMemoryIsStatedInBytes() async throws {
        let (intake, _) = try Self.intake()
        // 100,000 clients and one key's 10,000 new series an hour.
        #expect(intake.limitBytes > 1_000_000)
        #expect(intake.limitBytes < 16_000_000)
    }
}
