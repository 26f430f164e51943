import APIHealth
import APIHealthAsyncHTTPClient
import APIHealthTestKit
import AsyncHTTPClient
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @_spi(Benchmarking) @testable import APIHealth

/// AsyncHTTPClient requests learn the `country` tag from the response header the API's CDN adds, as URLSession
/// requests do (CountryTests), and count a refused connection as a connect error.
@Suite struct AsyncHTTPClientCountryTests {
    @Test func requestsLearnTheCountryFromTheResponseHeader() async throws {
        let country = Locked("BR")
        let server = try await LoopbackHTTPServer.start { _ in
            .text(200, "ok", headers: [("CF-IPCountry", country.withLock { $0 })])
        }
        var configuration = APIHealthConfiguration(serviceName: "ahc-country")
        configuration.spool = nil
        configuration.capture.countryHeader = "CF-IPCountry"
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        // A point for every request: the country tag is read on each.
        configuration.capture.rawPoints = .all
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "ahc-country"))
        let client = HTTPClient(eventLoopGroupProvider: .singleton)

        func get() async throws {
            let response = try await client.execute(
                HTTPClientRequest(url: server.baseURL + "/items"),
                timeout: .seconds(60),
                recordingTo: agent,
                module: "ahc"
            )
            for try await _ in response.body {}
        }
        func countries() -> [String] {
            agent.pendingPoints().filter { $0.measurement == PointSchema.Measurement.request }
                .map { point in point.tags.first { $0.key == "country" }?.value ?? "-" }
        }
        try await get()
        try await get()
        #expect(await waitUntil { countries().count == 2 })
        country.withLock { $0 = "T1" }
        try await get()
        #expect(await waitUntil { countries().count == 3 })
        country.withLock { $0 = "de" }
        try await get()
        #expect(await waitUntil { countries().count == 4 })
        #expect(countries() == ["BR", "BR", "BR", "DE"])
        #expect(agent.metrics.countryValuesIgnored == 1)

        let down = try RefusingPort()
        _ = try? await client.execute(
            HTTPClientRequest(url: "http://127.0.0.1:\(down.port)/items"),
            timeout: .seconds(60),
            recordingTo: agent,
            module: "ahc"
        )
        #expect(await waitUntil { countries().count == 5 })
        _ = agent.recordIntervalPoints(endingAt: Timestamp(date: Date().addingTimeInterval(10)))
        let refused = agent.pendingPoints().first {
            $0.measurement == PointSchema.Measurement.requestInterval
                && $0.tags.contains(Point.Tag("status_class", "error"))
        }
        #expect(
            refused?.fields.contains(Point.Field("errors_connect", .int(1))) == true,
            "\(String(describing: refused))"
        )
        try await client.shutdown()
        await agent.shutdown(deadline: .seconds(5))
        try await server.shutdown()
    }
}
