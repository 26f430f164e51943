import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Benchmarking) @testable import APIHealth

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An app's installs, one agent each, into the real InfluxDB 1.x and VictoriaMetrics: no series per
/// install, no install's points overwritten by another's, and a device clock two hours fast corrected.
@Suite struct AppInstallsTests {
    @Test func installsShareTheirSeriesAndEveryRequestCountsInBothDestinations() async throws {
        let influx = try await InfluxDB1.freshDatabase("installs")
        let victoria = try VictoriaMetrics()
        var results: [AppInstalls.Result] = []
        for installs in [10, 50] {
            let run = AppInstalls(
                installs: installs,
                influx: influx,
                victoria: victoria,
                service: "installs_\(installs)_\(UInt32.random(in: 0...UInt32.max))"
            )
            let result = try await run.run()
            #expect(result.requestsMade == installs * 50)
            #expect(result.countedInInfluxDB == result.requestsMade, "\(result)")
            #expect(result.countedInVictoriaMetrics == result.requestsMade, "\(result)")
            results.append(result)
        }
        // Five countries, four endpoints (two of them with 503s and timeouts besides): one series per
        // endpoint, status class and country, however many installs.
        #expect(results[0].seriesInInfluxDB == results[1].seriesInInfluxDB)
        #expect(results[0].seriesInVictoriaMetrics == results[1].seriesInVictoriaMetrics)
        #expect(results[0].seriesInInfluxDB > 5)
        #expect(results[0].seriesInVictoriaMetrics == results[0].seriesInInfluxDB)
    }

    /// The IMF-fixdate of now, as a server sends it.
    static func httpDateNow() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date())
    }

    @Test func aDeviceTwoHoursFastWritesPointsWithinASecondOfTrueTime() async throws {
        let influx = try await InfluxDB1.freshDatabase("device_clock")
        let api = try await LoopbackHTTPServer.start { _ in
            .text(200, "{}", headers: [("Date", Self.httpDateNow())])
        }
        var configuration = APIHealthConfiguration.app(
            "device_clock",
            version: "1.0.0",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = nil
        configuration.capture.rawPoints = .all
        configuration.aggregation?.interval = .seconds(1)
        configuration.batching.flushDelay = .milliseconds(100)
        configuration.batching.flushJitter = .zero
        let agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: "device-clock"),
            clock: ShiftedWallClock(ahead: .seconds(7_200))
        )
        agent.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "shop")
        let session = URLSession(configuration: sessionConfiguration)
        // The API's Date headers are the readings until InfluxDB has answered a write; either way the
        // offset settles on true time.
        #expect(
            try await waitUntil {
                _ = try await session.data(from: URL(string: "\(api.baseURL)/warmup")!)
                guard let offset = agent.metrics.clockOffset else { return false }
                return abs(offset.secondsDouble + 7_200) < 1
            }
        )
        let first = Date()
        for index in 0..<10 {
            _ = try await session.data(from: URL(string: "\(api.baseURL)/measured?i=\(index)")!)
        }
        let last = Date()
        // Past the next interval's end, so the measured requests' interval point is written before shutdown.
        #expect(await waitUntil { agent.metrics.intervalPoints > 0 && Date().timeIntervalSince(last) > 1.5 })
        await agent.shutdown(deadline: .seconds(60))
        try await api.shutdown()

        let offset = try #require(agent.metrics.clockOffset)
        #expect(abs(offset.secondsDouble + 7_200) < 1, "offset \(offset)")
        func seconds(_ row: [String: Any]) -> Double {
            Double((row["time"] as? NSNumber)?.int64Value ?? 0) / 1e9
        }
        let raw =
            try await influx.query("SELECT * FROM apihealth_request WHERE \"path\" = '/measured'").first?.rows ?? []
        #expect(raw.count == 10)
        for row in raw {
            let time = seconds(row)
            #expect(time > first.timeIntervalSince1970 - 1 && time < last.timeIntervalSince1970 + 1, "\(time)")
        }
        let intervals =
            try await influx.query(
                "SELECT * FROM apihealth_request_interval WHERE \"path\" = '/measured'"
            ).first?.rows ?? []
        #expect(!intervals.isEmpty)
        #expect(intervals.reduce(0) { $0 + (($1["count"] as? NSNumber)?.intValue ?? 0) } == 10)
        for row in intervals {
            // Stamped within the interval that held them, ending at most a second after the last.
            let time = seconds(row)
            #expect(
                time > first.timeIntervalSince1970 - 1 && time < last.timeIntervalSince1970 + 2,
                "\(time) first \(first.timeIntervalSince1970) last \(last.timeIntervalSince1970)"
            )
        }
        let health = try await influx.query("SELECT last(\"points_recorded\") FROM apihealth_agent").first?.rows ?? []
        let healthTime = try seconds(#require(health.first))
        #expect(abs(healthTime - Date().timeIntervalSince1970) < 60, "the last health point, stamped at shutdown")
    }
}
