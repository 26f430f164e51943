import APIHealthTestKit
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Benchmarking) @_spi(Package) @testable import APIHealth

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

    /// A device two hours fast writes its points in true time. How close is what the correction says
    /// of itself: the true offset lies within its uncertainty (half the range the `Date` headers agree
    /// on), so a raw point is stamped within that of its request's start; an interval point lies within
    /// its interval, whose end is the corrected clock's (an interval's tick can run late on a loaded
    /// machine and count requests made after its end, so the bound below it is the previous tick's time).
    @Test func aDeviceTwoHoursFastWritesPointsInTrueTime() async throws {
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
        let fast = Duration.seconds(7_200)
        let agent = try APIHealthAgent(
            configuration: configuration,
            logger: Logger(label: "device-clock"),
            clock: ShiftedWallClock(ahead: fast)
        )
        /// Each interval's points as the agent takes them, with the true time it handed them over.
        let taken = Locked<[(at: Double, points: [Point])]>([])
        agent.observeIntervalPoints { points in taken.withLock { $0.append((Date().timeIntervalSince1970, points)) } }
        agent.start()
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        agent.instrument(sessionConfiguration, module: "shop")
        let session = URLSession(configuration: sessionConfiguration)
        // The API's Date headers are the readings until InfluxDB has answered a write; then an interval
        // ends on the corrected clock, so the measured requests come after a tick of it.
        let settled = try await waitUntil {
            _ = try await session.data(from: URL(string: "\(api.baseURL)/warmup")!)
            return agent.metrics.clockOffset != nil
        }
        #expect(settled)
        let ticksBefore = taken.withLock { $0.count }
        #expect(
            try await waitUntil {
                _ = try await session.data(from: URL(string: "\(api.baseURL)/warmup")!)
                return taken.withLock { $0.count } > ticksBefore
            }
        )
        let tickBefore = taken.withLock { $0.last?.at } ?? .infinity
        let first = Date().timeIntervalSince1970
        for index in 0..<10 {
            _ = try await session.data(from: URL(string: "\(api.baseURL)/measured?i=\(index)")!)
        }
        let last = Date().timeIntervalSince1970
        await agent.shutdown(deadline: .seconds(60))
        try await api.shutdown()

        let offset = try #require(agent.metrics.clockOffset)
        let uncertainty = try #require(agent.metrics.clockOffsetUncertainty)
        #expect(
            offset + fast <= uncertainty && .zero - (offset + fast) <= uncertainty,
            "offset \(offset), uncertainty \(uncertainty)"
        )
        // Any offset applied on the way was as close as its own uncertainty, which is at most this.
        let worst = Double(ClockOffsetEstimator.maximumUncertainty) / 1e9
        let interval = 1.0
        func seconds(_ row: [String: Any]) -> Double {
            Double((row["time"] as? NSNumber)?.int64Value ?? 0) / 1e9
        }
        let raw =
            try await influx.query("SELECT * FROM apihealth_request WHERE \"path\" = '/measured'").first?.rows ?? []
        #expect(raw.count == 10)
        for row in raw {
            let time = seconds(row)
            #expect(time >= first - worst && time <= last + worst, "\(time) first \(first) last \(last)")
        }

        // The interval points of the measured requests, as taken: stamped within their interval, which
        // ended after the tick before them (on a clock at most `worst` off, stepped at most once by as
        // much) and no later than the corrected clock when they were taken (an interval's end is moved
        // by less than ClockCorrection.step when the offset moves).
        let measured = taken.withLock { $0 }.flatMap { tick in
            tick.points.filter { $0.tags.contains(Point.Tag("path", "/measured")) }.map { (tick.at, $0) }
        }
        #expect(!measured.isEmpty)
        for (at, point) in measured {
            let time = try Double(#require(point.timestamp).nanosecondsSinceEpoch) / 1e9
            let step = Double(ClockCorrection.step) / 1e9
            #expect(
                time > tickBefore - worst - 2 * interval && time <= at + worst + step,
                "\(time) tick before \(tickBefore) taken \(at)"
            )
        }
        let intervals =
            try await influx.query(
                "SELECT * FROM apihealth_request_interval WHERE \"path\" = '/measured'"
            ).first?.rows ?? []
        #expect(intervals.reduce(0) { $0 + (($1["count"] as? NSNumber)?.intValue ?? 0) } == 10)
        let stored = intervals.map(seconds).sorted()
        let stamped = measured.compactMap { $0.1.timestamp.map { Double($0.nanosecondsSinceEpoch) / 1e9 } }.sorted()
        #expect(
            stored.count == stamped.count && zip(stored, stamped).allSatisfy { abs($0 - $1) < 1e-6 },
            "InfluxDB holds the interval points as taken: \(stored) \(stamped)"
        )
        let health = try await influx.query("SELECT last(\"points_recorded\") FROM apihealth_agent").first?.rows ?? []
        let healthTime = try seconds(#require(health.first))
        #expect(abs(healthTime - Date().timeIntervalSince1970) < 60, "the last health point, stamped at shutdown")
    }
}
