import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthTestKit
import AsyncHTTPClient
import Foundation
import LineProtocol
import Logging
import NIOCore
import TestSupport
import Testing

@_spi(Package) @_spi(Benchmarking) @testable import APIHealth

/// Cache advice from real AsyncHTTPClient traffic, against the same loopback API and expectations as the
/// URLSession capture (CacheAdviceCaptureTests); a response dropped unread ends with its status and no
/// digest: counted as storable, compared with nothing.
@Suite struct AsyncHTTPClientCacheAdviceTests {
    private static func agent(advising: Bool, clock: ManualClock) throws -> APIHealthAgent {
        var configuration = APIHealthConfiguration(serviceName: "ahc-cache-advice")
        configuration.spool = nil
        configuration.capture.cacheAdvice = advising
        // Eight one-segment paths, each new at first: every one written as itself from its first request.
        configuration.capture.learningThreshold = 1_000
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // A point for every request: the tests read each request's own.
        configuration.capture.rawPoints = .all
        return try APIHealthAgent(configuration: configuration, logger: Logger(label: "ahc-cache"), clock: clock)
    }

    private static func requests(_ agent: APIHealthAgent, path: String) -> [Point] {
        agent.pendingPoints().filter {
            $0.measurement == PointSchema.Measurement.request && $0.tags.contains(Point.Tag(PointSchema.Tag.path, path))
        }
    }

    @Test func asyncHTTPClientResponsesAreJudgedAsTheServerSentThem() async throws {
        let scenario = CacheAdviceScenario()
        let server = try await LoopbackHTTPServer.start(handler: scenario.handler)
        let clock = ManualClock()
        let agent = try Self.agent(advising: true, clock: clock)
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        try await scenario.run(
            advance: { clock.advance(by: $0) },
            fetch: { path, headers in
                var request = HTTPClientRequest(url: server.baseURL + path)
                for (name, value) in headers { request.headers.add(name: name, value: value) }
                let response = try await client.execute(
                    request,
                    timeout: .seconds(60),
                    recordingTo: agent,
                    module: "api"
                )
                for try await _ in response.body {}
                return Int(response.status.code)
            },
            drop: { path in
                var request = HTTPClientRequest(url: server.baseURL + path)
                request.headers.add(name: "X-Stall", value: "1")
                let response = try await client.execute(
                    request,
                    timeout: .seconds(60),
                    recordingTo: agent,
                    module: "api"
                )
                #expect(response.status == .ok)
            }
        )
        #expect(await waitUntil { Self.requests(agent, path: "/dropped").count == 3 })
        #expect(agent.recordIntervalPoints(endingAt: Timestamp(date: Date().addingTimeInterval(10))))
        let points = agent.pendingPoints()
        let observed = CacheAdviceScenario.observed(points)
        for (path, expected) in CacheAdviceScenario.expected(dropCounts: true) {
            #expect(observed[path] == expected, "\(path)")
        }
        let repeatedDurations = CacheAdviceScenario.repeatedDurations(of: "/catalogue", in: points)
        #expect(repeatedDurations.count == 2)
        let saved = CacheAdviceScenario.hitMilliseconds(points, lifetime: 300)["/catalogue"] ?? 0
        #expect(abs(saved - repeatedDurations.reduce(0, +)) < 0.001, "\(saved) \(repeatedDurations)")
        try await client.shutdown()
        await agent.shutdown(deadline: .seconds(5))
        try await server.shutdown()
    }

    /// The observation digests a body only with cache advice: without it no byte is read.
    @Test func anObservationDigestsOnlyWithCacheAdvice() throws {
        let chunk = ByteBuffer(string: #"{"id":1}"#)
        for advising in [false, true] {
            let agent = try Self.agent(advising: advising, clock: ManualClock())
            let observation = RequestObservation(
                agent: agent,
                module: "api",
                method: "GET",
                url: "http://127.0.0.1:9/items",
                requestHeaders: [:],
                requestBytes: 0
            )
            observation.receivedHead(status: 200, headers: ["Cache-Control": "max-age=5"], redirects: nil)
            observation.received(chunk)
            observation.received(chunk)
            #expect(observation.digestedBytes == (advising ? 16 : nil))
            observation.finish()
            #expect(observation.cacheEvidence()?.policy.freshFor == 5)
            #expect((observation.cacheEvidence()?.digest != nil) == advising)
        }
    }
}
