import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @_spi(Benchmarking) @testable import APIHealth

/// Hosts, endpoints and incidents that would blow up the series, the memory or the write volume, on an
/// agent that is not started: intervals end when the test says (`recordIntervalPoints(endingAt:)`).
@Suite struct BoundedTrafficTests {
    static func agent(
        label: String = "bounded",
        _ configure: (inout APIHealthConfiguration) -> Void = { _ in }
    ) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "bounded")
        configuration.spool = nil
        configuration.instance = "replica-1"
        // A point for every request unless a test chooses: the overflow series is read on them too.
        configuration.capture.rawPoints = .all
        configure(&configuration)
        return try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: label, factory: { CollectingLogHandler(label: $0) })
        )
    }

    static func sample(
        _ url: String,
        module: String = "m",
        status: Int? = 200,
        milliseconds: Int64 = 12,
        at seconds: Double = 0
    ) -> RequestSample {
        RequestSample(
            method: "GET",
            url: URL(string: url)!,
            module: module,
            startedAt: Date(timeIntervalSince1970: 1_763_800_000 + seconds),
            duration: .milliseconds(milliseconds),
            statusCode: status
        )
    }

    static func end(_ interval: Int) -> Timestamp { Timestamp(seconds: 1_763_800_000 + 10 * Int64(interval + 1)) }

    static func intervalPoints(_ points: [Point]) -> [Point] {
        points.filter { $0.measurement == PointSchema.Measurement.requestInterval }
    }

    static func count(_ point: Point) -> Int64 {
        if case .int(let count)? = point.fields.first(where: { $0.key == PointSchema.IntervalField.count })?.value {
            return count
        }
        return 0
    }

    /// The three shapes of hosts a multi-tenant service calls: numbered subdomains, IPv4 literals, and
    /// per-region hosts named after their instance's address.
    static func host(_ index: Int) -> String {
        switch index % 3 {
        case 0: return "tenant\(index).api.example.com"
        case 1: return "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)"
        default:
            let regions = ["us-east-1", "eu-west-1", "ap-south-1", "sa-east-1"]
            return "ip-10-0-\(index >> 8 & 255)-\(index & 255).\(regions[index / 3 % 4]).compute.example.net"
        }
    }

    static let paths = ["/users/{n}", "/orders/{n}/items", "/health", "/v2/search"]

    @Test func hostsOfThreeShapesFoldIntoAFewTagsAndEveryRequestIsCounted() async throws {
        let agent = try Self.agent { $0.capture.rawPoints = .none }
        let samples = 100_000
        // Long and synchronous: off the concurrency pool, which other tests' agents need meanwhile.
        let points = try await onOwnThread {
            let hosts = 50_000
            let perInterval = 10_000
            var intervals = 0
            for index in 0..<samples {
                let path = Self.paths[index % 4].replacingOccurrences(of: "{n}", with: "\(index % 997)")
                agent.record(
                    Self.sample("https://\(Self.host(index % hosts))\(path)", at: Double(index / perInterval) * 10)
                )
                if (index + 1) % perInterval == 0 {
                    agent.recordIntervalPoints(endingAt: Self.end(intervals))
                    intervals += 1
                }
            }
            return Self.intervalPoints(agent.pendingPoints())
        }
        let hostTags = Set(points.compactMap { $0.tag(PointSchema.Tag.host) })
        #expect(hostTags.count <= 64, "\(hostTags.count) host tags: \(hostTags.sorted().prefix(20))")
        #expect(hostTags.contains("*.api.example.com") && hostTags.contains(HostLearner.ipv4), "\(hostTags.sorted())")
        #expect(hostTags.contains("*.eu-west-1.compute.example.net"), "\(hostTags.sorted())")
        #expect(points.count * 40 <= samples, "\(points.count) interval points for \(samples) requests")
        #expect(points.reduce(0) { $0 + Self.count($1) } == Int64(samples))
        #expect(agent.metrics.pointsDropped == 0)
    }

    @Test func hostRulesAndLearnedPositionsFoldHosts() {
        let learner = HostLearner(
            threshold: 4,
            rules: ["*.service.com", "*.Static.example.org:8443"],
            renderedSeries: .init()
        )
        #expect(learner.fold("my.app.service.com") == "*.service.com")
        #expect(learner.tag(name: "cdn.static.example.org", port: 8443) == "*.static.example.org:8443")
        #expect(learner.tag(name: "cdn.static.example.org", port: nil) == "cdn.static.example.org")
        // IP literals: as themselves up to the threshold, then one placeholder for every one.
        for last in 1...4 { #expect(learner.fold("192.168.0.\(last)") == "192.168.0.\(last)") }
        #expect(learner.fold("192.168.0.10") == "{ipv4}")
        #expect(learner.fold("192.168.0.1") == "{ipv4}", "learned for past addresses too")
        #expect(learner.tag(name: "::1", port: 8080) == "::1:8080")
        for last in 1...4 { _ = learner.fold("2001:db8::\(last)") }
        #expect(learner.tag(name: "::1", port: 8080) == "{ipv6}:8080")
        #expect(learner.fold("db-0042.internal.example.com") == "*.internal.example.com")
        // Two third-party APIs stay two hosts, and a region stays a region.
        #expect(learner.fold("api.stripe.com") == "api.stripe.com")
        #expect(learner.fold("api.us-east-1.example.com") == "api.us-east-1.example.com")
        #expect(learner.fold("s3.amazonaws.com") == "s3.amazonaws.com")
        // Word-like labels under one suffix: written as they are until the threshold, then `*`.
        for name in ["alpha", "bravo", "charlie", "delta"] {
            #expect(learner.fold("\(name).tenants.example.com") == "\(name).tenants.example.com")
        }
        #expect(learner.fold("echo.tenants.example.com") == "*.tenants.example.com")
        #expect(learner.fold("alpha.tenants.example.com") == "*.tenants.example.com", "learned for past hosts too")
    }

    @Test func aBadHostRuleIsATypedError() {
        var configuration = APIHealthConfiguration(serviceName: "bounded")
        configuration.capture.hostRules = ["api.example.com/v1"]
        #expect(throws: APIHealthConfiguration.Error.self) { try configuration.validate() }
        #expect(throws: APIHealthConfiguration.Error.self) {
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_MAXIMUM_ENDPOINTS": "0"], serviceName: "b")
        }
        #expect(throws: APIHealthConfiguration.Error.self) {
            try APIHealthConfiguration.fromEnvironment(["APIHEALTH_RAW_POINTS_PER_SECOND": "-1"], serviceName: "b")
        }
    }

    @Test func endpointsPastTheCapShareOneOverflowSeriesAndTotalsStayExact() throws {
        let label = "bounded-cap-\(UUID().uuidString)"
        let agent = try Self.agent(label: label) {
            $0.aggregation?.maximumEndpoints = 10
            $0.objectives.default.latency = .init(target: 0.99, threshold: .milliseconds(300))
        }
        for round in 0..<3 {
            for module in 0..<50 {
                agent.record(Self.sample("https://api.example.com/health", module: "m\(module)", at: Double(round)))
            }
        }
        agent.recordIntervalPoints(endingAt: Self.end(0))
        let all = agent.pendingPoints()
        let points = Self.intervalPoints(all)
        #expect(points.count == 11, "ten endpoints and the overflow series")
        #expect(points.reduce(0) { $0 + Self.count($1) } == 150)
        let overflow = try #require(points.first { $0.tag(PointSchema.Tag.host) == "{overflow}" })
        #expect(Self.count(overflow) == 120)
        #expect(overflow.tag(PointSchema.Tag.module) == "{overflow}")
        #expect(overflow.fields.contains { $0.key == PointSchema.IntervalField.requestsWithinLatencyObjective })
        let raw = all.filter { $0.measurement == PointSchema.Measurement.request }
        #expect(Set(raw.map { $0.tags }).count == 11, "ten raw series and one overflow series")
        let metrics = agent.metrics
        #expect(metrics.endpointLimit == 10 && metrics.endpoints == 10 && metrics.requestsOverflowed == 120)
        let health = AgentHealthPoint.make(metrics, tags: agent.everyPointTags, configuration: agent.configuration)
        #expect(health.fields.contains { $0.key == "requests_overflowed" && $0.value == .uint(120) })
        #expect(health.fields.contains { $0.key == "endpoint_limit" && $0.value == .uint(10) })
        agent.recordIntervalPoints(endingAt: Self.end(1))
        let warnings = CollectingLogHandler.messages.withLock { $0.filter { $0.hasPrefix(label) } }
        #expect(warnings.filter { $0.contains("cap of distinct endpoints") }.count == 1, "\(warnings)")
    }

    @Test func idleEndpointsAreEvictedAndARequestThatStillReachesOneIsCounted() throws {
        let agent = try Self.agent {
            $0.aggregation?.maximumEndpoints = 2
            $0.aggregation?.idleEviction = .seconds(20)
        }
        agent.record(Self.sample("https://api.example.com/a"))
        agent.record(Self.sample("https://api.example.com/b"))
        agent.recordIntervalPoints(endingAt: Self.end(0))
        agent.record(Self.sample("https://api.example.com/a", at: 10))
        for interval in 1...3 { agent.recordIntervalPoints(endingAt: Self.end(interval)) }
        #expect(agent.metrics.endpointsEvicted == 2 && agent.metrics.endpoints == 0)
        // A new endpoint takes a place given back, and the old ones come back without overflowing.
        agent.record(Self.sample("https://api.example.com/c", at: 40))
        agent.record(Self.sample("https://api.example.com/a", at: 40))
        agent.recordIntervalPoints(endingAt: Self.end(4))
        let last = Self.intervalPoints(agent.pendingPoints()).filter { $0.timestamp == Self.end(4) }
        #expect(Set(last.compactMap { $0.tag(PointSchema.Tag.path) }) == ["/a", "/c"])
        #expect(last.reduce(0) { $0 + Self.count($1) } == 2)
        #expect(agent.metrics.requestsOverflowed == 0)
    }

    @Test func anAllFailingUpstreamWritesABoundedShareOfItsRequests() throws {
        let agent = try Self.agent { $0.capture.rawPoints = .errorsAndSlow }
        let perSecond = 1_000
        let seconds = 60
        for second in 0..<seconds {
            for index in 0..<perSecond {
                let url = "https://upstream.example.com/endpoint\(index % 5)"
                agent.record(Self.sample(url, status: 503, at: Double(second) + Double(index) / Double(perSecond)))
            }
            if (second + 1) % 10 == 0 { agent.recordIntervalPoints(endingAt: Self.end(second / 10)) }
        }
        let points = agent.pendingPoints()
        let raw = points.filter { $0.measurement == PointSchema.Measurement.request }.count
        let requests = perSecond * seconds
        #expect(raw * 20 <= requests, "\(raw) raw points for \(requests) requests")
        #expect(raw == 5 * seconds * Int(RawPoints.defaultMaximumPerSecond), "the budget, to the point")
        #expect(Self.intervalPoints(points).reduce(0) { $0 + Self.count($1) } == Int64(requests))
        #expect(agent.metrics.requestsOnlyAggregated == UInt64(requests - raw))
    }

    @Test func allRawPointsStayUnbounded() throws {
        let agent = try Self.agent { $0.capture.rawPoints = .all }
        for index in 0..<1_000 {
            agent.record(Self.sample("https://upstream.example.com/x", status: 503, at: Double(index) / 1_000))
        }
        #expect(agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }.count == 1_000)
    }
}
