import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @_spi(Benchmarking) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Cache advice from real URLSession traffic: a loopback API with known patterns (identical bodies, bodies
/// that change, one body under several query strings, a 304 to an ETag, `no-store`, `max-age=60`, a chunked
/// body, 1 MiB bodies, a response cancelled mid-body), and the interval fields count exactly what it sent.
@Suite struct CacheAdviceCaptureTests {
    private static func agent(advising: Bool, clock: ManualClock) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "cache-advice")
        configuration.spool = nil
        configuration.capture.cacheAdvice = advising
        // Eight one-segment paths, each new at first: every one written as itself from its first request.
        configuration.capture.learningThreshold = 1_000
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // A point for every request: the tests read each request's own.
        configuration.capture.rawPoints = .all
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "cache-advice"), clock: clock)
    }

    private static func session(_ agent: APIHealthAgent) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        // The scenario's burst: eight requests of one host in flight together.
        configuration.httpMaximumConnectionsPerHost = CacheAdviceScenario.burstSize
        agent.instrument(configuration, module: "api")
        return URLSession(configuration: configuration)
    }

    private static func requests(_ agent: APIHealthAgent, path: String) -> [Point] {
        agent.pendingPoints().filter {
            $0.measurement == PointSchema.Measurement.request && $0.tags.contains(Point.Tag(PointSchema.Tag.path, path))
        }
    }

    @Test func urlSessionResponsesAreJudgedAsTheServerSentThem() async throws {
        let scenario = CacheAdviceScenario()
        let server = try await LoopbackHTTPServer.start(handler: scenario.handler)
        let clock = ManualClock()
        let agent = try Self.agent(advising: true, clock: clock)
        let session = Self.session(agent)
        try await scenario.run(
            advance: { clock.advance(by: $0) },
            fetch: { path, headers in
                var request = URLRequest(url: URL(string: server.baseURL + path)!)
                for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
                let (_, response) = try await session.data(for: request)
                return (response as? HTTPURLResponse)?.statusCode ?? 0
            },
            drop: { path in
                var request = URLRequest(url: URL(string: server.baseURL + path)!)
                request.setValue("1", forHTTPHeaderField: "X-Stall")
                let before = scenario.calls(to: "/dropped")
                let ended = AsyncStream<Void>.makeStream()
                let task = session.dataTask(with: request) { _, _, _ in ended.continuation.yield() }
                task.resume()
                #expect(await waitUntil { scenario.calls(to: "/dropped") > before })
                task.cancel()
                for await _ in ended.stream { break }
            }
        )
        #expect(await waitUntil { Self.requests(agent, path: "/dropped").count == 3 })
        #expect(agent.recordIntervalPoints(endingAt: Timestamp(date: Date().addingTimeInterval(10))))
        let points = agent.pendingPoints()
        let observed = CacheAdviceScenario.observed(points)
        for (path, expected) in CacheAdviceScenario.expected(dropCounts: false) {
            #expect(observed[path] == expected, "\(path)")
        }
        // The waiting a 5 min max-age would have saved is the served requests' own durations.
        let repeatedDurations = CacheAdviceScenario.repeatedDurations(of: "/catalogue", in: points)
        #expect(repeatedDurations.count == 2)
        let saved = CacheAdviceScenario.hitMilliseconds(points, lifetime: 300)["/catalogue"] ?? 0
        #expect(abs(saved - repeatedDurations.reduce(0, +)) < 0.001, "\(saved) \(repeatedDurations)")
        #expect(
            points.allSatisfy { point in
                !point.fields.contains { $0.key == "cache_served_locally" && $0.value != .int(0) }
            }
        )
        session.invalidateAndCancel()
        await agent.shutdown(deadline: .seconds(5))
        try await server.shutdown()
    }

    /// Without cache advice, capture reads no byte of a body and the interval points carry no cache field.
    @Test func withoutCacheAdviceNoBodyIsRead() async throws {
        let scenario = CacheAdviceScenario()
        let server = try await LoopbackHTTPServer.start(handler: scenario.handler)
        let clock = ManualClock()
        let agent = try Self.agent(advising: false, clock: clock)
        let session = Self.session(agent)
        for path in ["/catalogue", "/catalogue", "/large", "/large"] {
            _ = try await session.data(from: URL(string: server.baseURL + path)!)
        }
        #expect(await waitUntil { Self.requests(agent, path: "/large").count == 2 })
        #expect(agent.recordIntervalPoints(endingAt: Timestamp(date: Date().addingTimeInterval(10))))
        let points = agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.requestInterval }
        #expect(points.count == 2)
        #expect(points.allSatisfy { point in !point.fields.contains { $0.key.hasPrefix("cache_") } })
        #expect(agent.recorder.cacheAdvisor == nil)
        session.invalidateAndCancel()
        await agent.shutdown(deadline: .seconds(5))
        try await server.shutdown()
    }
}
