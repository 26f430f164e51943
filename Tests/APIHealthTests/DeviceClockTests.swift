import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The device's clock corrected only from answers a clock can trust, over loopback APIs and destinations:
/// a cached object's `Date` read with its `Age`, a destination's error no reading, and a destination's
/// first answer replacing what the API's clock said.
@Suite struct DeviceClockTests {
    /// The IMF-fixdate of true time `shift` seconds from now.
    static func httpDate(secondsFromNow shift: Int64) -> String {
        ClockCorrectionTests.httpDate(Int64(Date().timeIntervalSince1970) + shift)
    }

    private static func configuration(destination: InfluxDestination?) -> APIHealthConfiguration {
        var configuration = APIHealthConfiguration(serviceName: "device_clock", destination: destination)
        configuration.spool = nil
        configuration.correctsClock = true
        configuration.capture.rawPoints = .all
        configuration.batching.flushDelay = .milliseconds(50)
        configuration.batching.flushJitter = .zero
        return configuration
    }

    /// Three hits of a day-old object at a CDN (its origin's `Date`, `Age: 86400`) on a phone two hours
    /// slow: read with their age they agree on the true offset, never on one a day off.
    @Test func cachedResponsesOfADayOldObjectNeverMoveTheOffset() async throws {
        let api = try await LoopbackHTTPServer.start { _ in
            .text(200, "{}", headers: [("Date", Self.httpDate(secondsFromNow: -86_400)), ("Age", "86400")])
        }
        let agent = try APIHealthAgent(
            configuration: Self.configuration(destination: nil),
            logger: Logger(label: "device-clock"),
            clock: ShiftedWallClock(ahead: .seconds(-7_200))
        )
        agent.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "cdn")
        let session = URLSession(configuration: sessionConfiguration)
        for index in 0..<3 {
            _ = try await session.data(from: URL(string: "\(api.baseURL)/object?i=\(index)")!)
        }
        let metrics = agent.metrics
        let stamps = agent.pendingPoints().compactMap { $0.timestamp?.nanosecondsSinceEpoch }
        let trueNow = Date().timeIntervalSince1970
        await agent.shutdown(deadline: .seconds(10))
        try await api.shutdown()
        let offset = try #require(metrics.clockOffset)
        #expect(abs(offset.secondsDouble - 7_200) < 2, "offset \(offset)")
        #expect(metrics.clockReadingsIgnored == 0)
        // The first two were recorded before readings agreed, on the device's clock, and were still pending when
        // they did: moved to true time, none went out on the device's clock.
        #expect(stamps.count == 3)
        #expect(stamps.allSatisfy { abs(Double($0) / 1e9 - trueNow) < 10 }, "\(stamps) against \(trueNow)")
        #expect(metrics.pointsOnDeviceClock == 0)
    }

    /// A phone two hours fast whose clock the user sets right: the next request's point is in true time,
    /// though 16 readings of the old clock would have outvoted the new ones for most of an hour.
    @Test func aWallClockSteppedBackTwoHoursIsFollowedWithinOneReading() async throws {
        let api = try await LoopbackHTTPServer.start { _ in
            .text(200, "{}", headers: [("Date", Self.httpDate(secondsFromNow: 0))])
        }
        let clock = ShiftedWallClock(ahead: .seconds(7_200))
        let agent = try APIHealthAgent(
            configuration: Self.configuration(destination: nil),
            logger: Logger(label: "device-clock"),
            clock: clock
        )
        agent.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "shop")
        let session = URLSession(configuration: sessionConfiguration)
        for index in 0..<16 {
            _ = try await session.data(from: URL(string: "\(api.baseURL)/before?i=\(index)")!)
        }
        let before = try #require(agent.metrics.clockOffset)
        #expect(abs(before.secondsDouble + 7_200) < 2, "offset before the step \(before)")
        clock.step(by: .seconds(-7_200))
        let sent = Date().timeIntervalSince1970
        _ = try await session.data(from: URL(string: "\(api.baseURL)/after")!)
        let after = try #require(agent.metrics.clockOffset)
        #expect(abs(after.secondsDouble) < 2, "offset after the step \(after)")
        let point = try #require(
            agent.pendingPoints().first { $0.tags.contains(Point.Tag("path", "/after")) }
        )
        let stamped = Double(try #require(point.timestamp).nanosecondsSinceEpoch) / 1e9
        #expect(abs(stamped - sent) < 2, "stamped \(stamped), sent \(sent)")
        #expect(agent.clockCorrection?.wallClockSteps == 1)
        await agent.shutdown(deadline: .seconds(1))
        try await api.shutdown()
    }

    /// Responses the app's own `URLCache` serves carry the `Date` of their first fetch, 12 hours ago:
    /// the loading system answers from the cache, and none of them is a reading.
    @Test func responsesALocalCacheServesAreNoReadings() async throws {
        let fetched = Locked(0)
        let api = try await LoopbackHTTPServer.start { _ in
            fetched.withLock { $0 += 1 }
            return .text(200, "{}", headers: [("Date", Self.httpDate(secondsFromNow: 0))])
        }
        let agent = try APIHealthAgent(
            configuration: Self.configuration(destination: nil),
            logger: Logger(label: "device-clock")
        )
        agent.start()
        let cache = URLCache(memoryCapacity: 1 << 20, diskCapacity: 0, diskPath: nil)
        let url = URL(string: "\(api.baseURL)/catalog")!
        let stored = try #require(
            HTTPURLResponse(
                url: url,
                statusCode: 200,
                httpVersion: "HTTP/1.1",
                headerFields: [
                    "Date": Self.httpDate(secondsFromNow: -43_200), "Cache-Control": "max-age=604800",
                    "Content-Type": "application/json",
                ]
            )
        )
        cache.storeCachedResponse(CachedURLResponse(response: stored, data: Data("{}".utf8)), for: URLRequest(url: url))
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.urlCache = cache
        sessionConfiguration.requestCachePolicy = .returnCacheDataElseLoad
        agent.instrument(sessionConfiguration, module: "catalog")
        let session = URLSession(configuration: sessionConfiguration)
        for _ in 0..<3 { _ = try await session.data(for: URLRequest(url: url)) }
        let metrics = agent.metrics
        await agent.shutdown(deadline: .seconds(1))
        try await api.shutdown()
        try #require(fetched.withLock { $0 } == 0, "the cache answered: nothing reached the API")
        #expect(metrics.clockOffset == nil)
        #expect(metrics.clockReadingsIgnored == 0)
        #expect(metrics.pointsOnDeviceClock == 3, "no offset: every point carries the device's time")
    }

    /// A destination behind a proxy that answers 503 with its own clock three hours ahead: no answer of
    /// it is a reading, however many agree.
    @Test func aDestinationsServerErrorIsNoReading() async throws {
        let answers = Locked(0)
        let destination = try await LoopbackHTTPServer.start { _ in
            answers.withLock { $0 += 1 }
            return .text(503, "busy", headers: [("Date", Self.httpDate(secondsFromNow: 10_800)), ("Retry-After", "0")])
        }
        let agent = try APIHealthAgent(
            configuration: Self.configuration(
                destination: InfluxDestination(url: URL(string: destination.baseURL)!, api: .v1(database: "x"))
            ),
            logger: Logger(label: "device-clock")
        )
        agent.start()
        for index in 0..<3 {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://api.example.com/items/\(index)")!,
                    module: "shop",
                    startedAt: Date(),
                    duration: .milliseconds(20),
                    statusCode: 200
                )
            )
            agent.flush()
        }
        #expect(await waitUntil { answers.withLock { $0 } >= 4 }, "the destination answered \(answers.withLock { $0 })")
        let metrics = agent.metrics
        await agent.shutdown(deadline: .seconds(1))
        try await destination.shutdown()
        #expect(metrics.clockOffset == nil)
        #expect(agent.clockCorrection?.wantsAPIReadings == true, "a 503 is not a destination's answer")
    }

    /// An API whose clock is 40 s behind sets the offset at launch; the destination's first answer to a
    /// post replaces it at once: a short session that posts once is still stamped on the destination's
    /// clock.
    @Test func theFirstPostReplacesAnAPIDerivedOffset() async throws {
        let api = try await LoopbackHTTPServer.start { _ in
            .text(200, "{}", headers: [("Date", Self.httpDate(secondsFromNow: -40))])
        }
        let posts = Locked(0)
        let destination = try await LoopbackHTTPServer.start { _ in
            posts.withLock { $0 += 1 }
            return .text(204, "", headers: [("Date", Self.httpDate(secondsFromNow: 0))])
        }
        var configuration = Self.configuration(
            destination: InfluxDestination(url: URL(string: destination.baseURL)!, api: .v1(database: "x"))
        )
        // Nothing is sent before the API's readings have agreed: the batch waits for an explicit flush.
        configuration.batching.flushDelay = .seconds(3_600)
        configuration.batching.maximumAge = .seconds(3_600)
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "device-clock"))
        agent.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "shop")
        let session = URLSession(configuration: sessionConfiguration)
        for index in 0..<3 {
            _ = try await session.data(from: URL(string: "\(api.baseURL)/items/\(index)")!)
        }
        let fromAPI = try #require(agent.metrics.clockOffset)
        #expect(abs(fromAPI.secondsDouble + 40) < 2, "offset from the API \(fromAPI)")
        #expect(posts.withLock { $0 } == 0)
        #expect(await agent.flush(waitingUpTo: .seconds(30)))
        #expect(posts.withLock { $0 } == 1)
        let fromDestination = try #require(agent.metrics.clockOffset)
        #expect(abs(fromDestination.secondsDouble) < 2, "offset after one post \(fromDestination)")
        await agent.shutdown(deadline: .seconds(10))
        try await api.shutdown()
        try await destination.shutdown()
    }
}
