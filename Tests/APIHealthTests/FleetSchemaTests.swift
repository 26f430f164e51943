import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @_spi(Benchmarking) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Global tags, interval aggregates and raw points, on an agent that is not started: intervals end when the
/// test says (`recordIntervalPoints(endingAt:)`).
@Suite struct FleetSchemaTests {
    static func agent(_ configure: (inout APIHealthConfiguration) -> Void = { _ in }) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "fleet-schema")
        configuration.spool = nil
        configuration.instance = "replica-7"
        // A point for every request unless a test chooses: most read each request's own.
        configuration.capture.rawPoints = .all
        configure(&configuration)
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "fleet-schema"))
    }

    static func sample(
        _ path: String = "/users/42",
        status: Int? = 200,
        milliseconds: Int64 = 12,
        at offset: Double = 0
    ) -> RequestSample {
        RequestSample(
            method: "GET",
            url: URL(string: "https://api.example.com\(path)")!,
            module: "m",
            startedAt: Date(timeIntervalSince1970: 1_763_800_000 + offset),
            duration: .milliseconds(milliseconds),
            statusCode: status,
            error: status == nil ? RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1004) : nil
        )
    }

    static let end = Timestamp(seconds: 1_763_800_010)

    @Test func everyPointCarriesServiceInstanceAndTheGlobalTags() throws {
        let agent = try Self.agent { $0.globalTags = ["env": "prod", "region": "eu-1"] }
        agent.record(Self.sample())
        agent.recordParseFailure(
            for: URLRequest(url: URL(string: "https://api.example.com/users/42")!),
            response: nil,
            error: DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "x")),
            module: "m"
        )
        agent.recordIntervalPoints(endingAt: Self.end)
        let points = agent.pendingPoints()
        #expect(
            Set(points.map(\.measurement)) == [
                PointSchema.Measurement.request, PointSchema.Measurement.parseFailure,
                PointSchema.Measurement.requestInterval,
            ]
        )
        for point in points {
            let tags = Dictionary(uniqueKeysWithValues: point.tags.map { ($0.key, $0.value) })
            #expect(tags["service"] == "fleet-schema" && tags["instance"] == "replica-7", "\(point)")
            #expect(tags["env"] == "prod" && tags["region"] == "eu-1", "\(point)")
        }
        let health = AgentHealthPoint.make(
            AgentMetrics(),
            tags: agent.configuration.everyPointTags,
            configuration: agent.configuration,
            at: Self.end
        )
        #expect(Set(health.tags) == Set(agent.configuration.everyPointTags))
    }

    @Test func installsWithoutAnInstanceStampTheirIntervalPointsApartWithinTheInterval() throws {
        var stamps: Set<Timestamp> = []
        for install in 0..<20 {
            let agent = try Self.agent {
                $0.instance = ""
                $0.country = ["BR", "DE"][install % 2]
            }
            agent.record(Self.sample())
            agent.recordIntervalPoints(endingAt: Self.end)
            let points = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
            #expect(points.count == 1)
            for point in points {
                let stamp = try #require(point.timestamp)
                #expect(stamp <= Self.end && stamp > Self.end.adding(nanoseconds: -10_000_000_000), "\(stamp)")
                #expect(!point.tags.contains { $0.key == PointSchema.Tag.instance })
                stamps.insert(stamp)
            }
        }
        // One in 10¹⁰ instants each: twenty installs never draw the same one.
        #expect(stamps.count == 20)
        // With an instance, at the interval's end itself.
        let replica = try Self.agent()
        replica.record(Self.sample())
        replica.recordIntervalPoints(endingAt: Self.end)
        #expect(
            replica.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }.map(
                \.timestamp
            ) == [Self.end]
        )
        // At precision s, in whole seconds of the interval.
        let coarse = try Self.agent {
            $0.instance = ""
            $0.precision = .s
        }
        coarse.record(Self.sample())
        coarse.recordIntervalPoints(endingAt: Self.end)
        for point in coarse.pendingPoints() where point.measurement == PointSchema.Measurement.requestInterval {
            let stamp = try #require(point.timestamp)
            #expect(stamp.nanoseconds == 0 && stamp <= Self.end && stamp.seconds > Self.end.seconds - 10)
        }
    }

    @Test(arguments: Array(PointSchema.reservedTags))
    func aGlobalTagNamedLikeOneTheAgentWritesIsRefused(_ key: String) {
        var configuration = APIHealthConfiguration(serviceName: "fleet-schema")
        configuration.globalTags = [key: "x"]
        #expect {
            try configuration.validate()
        } throws: { error in
            "\(error)".contains("\"\(key)\" is a tag the agent writes itself")
        }
    }

    /// A global tag counts toward InfluxDB 1.x's key length like any other: a series key too long for it
    /// is refused and counted, never written.
    @Test func theKeyLengthRuleCountsTheGlobalTags() throws {
        let agent = try Self.agent { $0.globalTags = ["big": String(repeating: "x", count: 65_500)] }
        agent.record(Self.sample())
        #expect(agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }.isEmpty)
        #expect(agent.metrics.pointsInvalid + agent.metrics.pointsRepaired >= 1)
    }

    @Test func anIntervalPointSumsItsRequestsWithACumulativeHistogram() throws {
        let agent = try Self.agent()
        for milliseconds: Int64 in [3, 5, 5, 11, 300, 301, 70_000] {
            agent.record(Self.sample(milliseconds: milliseconds))
        }
        agent.record(Self.sample(status: 503, milliseconds: 9))
        agent.record(Self.sample(status: nil, milliseconds: 2))
        #expect(agent.recordIntervalPoints(endingAt: Self.end))
        let intervals = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
        #expect(intervals.count == 3, "2xx, 5xx and error: \(intervals)")
        #expect(intervals.allSatisfy { $0.timestamp == Self.end })
        let ok = try #require(intervals.first { $0.tags.contains(Point.Tag("status_class", "2xx")) })
        #expect(!ok.tags.contains { $0.key == "status" })
        let fields = Dictionary(uniqueKeysWithValues: ok.fields.map { ($0.key, $0.value) })
        #expect(fields["count"] == .int(7))
        #expect(fields["errors"] == .int(0))
        #expect(fields["duration_ms_sum"] == .float(3 + 5 + 5 + 11 + 300 + 301 + 70_000))
        #expect(fields["duration_ms_min"] == .float(3) && fields["duration_ms_max"] == .float(70_000))
        // A request of exactly a bound counts in its bucket.
        for (bound, count) in [
            ("le_1", 0), ("le_3", 1), ("le_4", 1), ("le_5", 3), ("le_12", 4), ("le_300", 5), ("le_350", 6),
        ] {
            #expect(fields[bound] == .int(Int64(count)), "\(bound)")
        }
        #expect(fields["le_60000"] == .int(6) && fields["le_inf"] == .int(7), "past every bound: only le_inf")
        let failed = intervals.filter { !$0.tags.contains(Point.Tag("status_class", "2xx")) }
        #expect(failed.allSatisfy { $0.fields.contains(Point.Field("errors", .int(1))) })
        // The next interval starts empty: nothing to write for it.
        let before = agent.pendingPoints().count
        agent.recordIntervalPoints(endingAt: Timestamp(seconds: 1_763_800_020))
        #expect(agent.pendingPoints().count == before)
    }

    @Test func errorsAndSlowWritesFailuresSlowOnesAndASample() throws {
        let agent = try Self.agent {
            $0.capture.rawPoints = .errorsAndSlow(slowerThan: .milliseconds(500), sampleRate: 0.1)
        }
        func raw() -> [Point] { agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request } }
        agent.record(Self.sample(status: 500, at: 0.001))
        agent.record(Self.sample(status: nil, at: 0.002))
        agent.record(Self.sample(milliseconds: 500, at: 0.003))
        #expect(raw().count == 3, "failures and a request at the threshold")
        // 10,000 ordinary requests: about a tenth written, all counted.
        for index in 0..<10_000 {
            agent.record(Self.sample(milliseconds: 10 + Int64(index % 20), at: 1 + Double(index) / 1_000))
        }
        let sampled = raw().count - 3
        #expect((800...1_200).contains(sampled), "\(sampled) of 10,000 at 10 %")
        #expect(agent.metrics.requestsOnlyAggregated == UInt64(10_000 - sampled))
        agent.recordIntervalPoints(endingAt: Self.end)
        // Now the endpoint's p99 is known (29 ms, in the bucket up to 30 ms): a request above that bound is
        // slow for this endpoint, and written whatever the sample says.
        let written = raw().count
        for index in 0..<20 { agent.record(Self.sample(milliseconds: 31, at: 20 + Double(index) / 1_000)) }
        #expect(raw().count == written + 20, "above the endpoint's p99")
        let counts = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
            .compactMap { point in point.fields.first { $0.key == "count" }?.value }
        #expect(counts.reduce(0) { if case .int(let n) = $1 { $0 + n } else { $0 } } == 10_003, "the first interval's")
    }

    @Test func noneWritesOnlyIntervalPoints() throws {
        let agent = try Self.agent { $0.capture.rawPoints = .none }
        for index in 0..<50 { agent.record(Self.sample(status: index % 10 == 0 ? 500 : 200, at: Double(index))) }
        agent.recordIntervalPoints(endingAt: Self.end)
        let points = agent.pendingPoints()
        #expect(points.allSatisfy { $0.measurement == PointSchema.Measurement.requestInterval })
        #expect(points.count == 2)
        #expect(agent.metrics.requestsOnlyAggregated == 50)
    }

    /// Eight threads record into the same endpoints while intervals end under them: every request is in
    /// exactly one interval point.
    @Test func intervalsEndingWhileThreadsRecordLoseAndRepeatNothing() async throws {
        let agent = try Self.agent { $0.capture.rawPoints = .none }
        let perThread = 2_000
        let finished = Locked(0)
        for thread in 0..<8 {
            Thread.detachNewThread {
                for index in 0..<perThread {
                    agent.record(
                        Self.sample(
                            index % 3 == 0 ? "/orders/\(index % 20)" : "/users/\(index % 20)",
                            status: index % 50 == 0 ? 500 : 200,
                            milliseconds: Int64(1 + (index + thread) % 400),
                            at: Double(index) / 1_000
                        )
                    )
                }
                finished.withLock { $0 += 1 }
            }
        }
        // Intervals end every millisecond for as long as the threads record, then once more.
        var end: Int64 = 1_763_800_010
        var ended = 0
        let deadline = ContinuousClock.now + eventTimeout
        while finished.withLock({ $0 }) < 8 && ContinuousClock.now < deadline {
            agent.recordIntervalPoints(endingAt: Timestamp(seconds: end))
            end += 10
            ended += 1
            try await Task.sleep(for: .milliseconds(1))  // paces interval ends among the recording threads
        }
        #expect(finished.withLock { $0 } == 8)
        agent.recordIntervalPoints(endingAt: Timestamp(seconds: end))
        var total: Int64 = 0
        var bucketTotal: Int64 = 0
        for point in agent.pendingPoints() where point.measurement == PointSchema.Measurement.requestInterval {
            for field in point.fields {
                guard case .int(let value) = field.value else { continue }
                if field.key == "count" { total += value }
                if field.key == "le_inf" { bucketTotal += value }
            }
        }
        #expect(total == Int64(8 * perThread), "after \(ended) intervals")
        #expect(bucketTotal == total)
    }

    /// Shutdown writes the interval it cuts short, stamped off the interval ends (a restarted replica of the
    /// same name writes the end of the interval it starts in); a request recorded after that is dropped
    /// and counted, never added to an interval nobody writes.
    @Test func shutdownWritesTheCutShortIntervalAndCountsLaterRequestsAsDropped() async throws {
        let agent = try Self.agent {
            $0.capture.rawPoints = .none
            $0.precision = .s
        }
        agent.record(Self.sample())
        await agent.shutdown()
        let intervals = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
        #expect(intervals.count == 1)
        let seconds = try #require(intervals.first?.timestamp).seconds
        #expect(seconds % 10 != 0, "\(seconds) is an interval end")
        agent.record(Self.sample())
        #expect(agent.metrics.pointsDropped == 1)
    }
}
