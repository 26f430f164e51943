import Foundation
import LineProtocol
import TestSupport
import Testing

@_spi(Benchmarking) @_spi(Package) import APIHealth

/// Installs writing through the real `apihealth-relay` into the real InfluxDB 1.x and VictoriaMetrics:
/// every request counted once in both, the relay's own health point there after SIGTERM; and two relays
/// behind vmauth's round robin, one killed mid-run and started again on its spool: nothing lost, and each
/// point once in InfluxDB.
@Suite struct RelayInstallsTests {
    /// Installs of the run: 1,000 (about 30 s on the shared 2-core machine); `APIHEALTH_RELAY_INSTALLS=N` for another count.
    static let installs = ProcessInfo.processInfo.environment["APIHEALTH_RELAY_INSTALLS"].flatMap { Int($0) } ?? 1_000

    @Test func installsThroughTheRelayCountExactlyInBothDatabases() async throws {
        let influx = try await InfluxDB1.freshDatabase("relay_installs")
        let victoria = try VictoriaMetrics()
        let service = "relay_installs_\(UInt32.random(in: 0...UInt32.max))"
        let relay = try RelayProcess(keys: "k-installs=\(service):prod", influx: influx, victoria: victoria)
        try await relay.start()
        let result = try await AppInstalls(
            installs: Self.installs,
            influx: influx,
            victoria: victoria,
            service: service,
            relay: AppInstalls.Relay(url: relay.url, key: "k-installs")
        ).run()
        #expect(result.requestsMade == Self.installs * 50)
        #expect(result.countedInInfluxDB == result.requestsMade, "\(result)")
        #expect(result.countedInVictoriaMetrics == result.requestsMade, "\(result)")
        #expect(result.seriesInInfluxDB > 5)
        #expect(result.seriesInVictoriaMetrics == result.seriesInInfluxDB)
        // Every point carries the key's environment.
        let environments = try await influx.query(
            "SELECT count(\"count\") FROM \"\(PointSchema.Measurement.requestInterval)\" WHERE \"env\" = 'prod' AND \"service\" = '\(service)'"
        )
        #expect((environments.first?.rows.first?["count"] as? NSNumber)?.intValue ?? 0 > 0)

        // SIGTERM: the relay writes its last health point and sends it before it exits.
        let stopped = relay.stop()
        #expect(stopped?.status == 0, "\(stopped?.log.suffix(2_000) ?? "")")
        var accepted = 0
        #expect(
            try await waitUntil {
                let rows = try await influx.query("SELECT last(\"lines_accepted\") FROM \"apihealth_relay\"")
                accepted = (rows.first?.rows.first?["last"] as? NSNumber)?.intValue ?? 0
                return accepted > 0
            }
        )
        let refused = try await influx.query("SELECT last(\"lines_refused\") FROM \"apihealth_relay\"")
        #expect((refused.first?.rows.first?["last"] as? NSNumber)?.intValue == 0)
        // The installs' lines: interval points and each install's last health point.
        let lines = try await influx.query(
            "SELECT count(\"count\") FROM \"\(PointSchema.Measurement.requestInterval)\" WHERE \"service\" = '\(service)'"
        )
        let intervalPoints = (lines.first?.rows.first?["count"] as? NSNumber)?.intValue ?? 0
        #expect(accepted == intervalPoints + Self.installs, "accepted \(accepted), interval points \(intervalPoints)")
    }

    @Test func twoRelaysBehindARoundRobinOneKilledMidRunLoseNothingAndInfluxDBKeepsEachPointOnce() async throws {
        let influx = try await InfluxDB1.freshDatabase("relay_pair")
        let victoria = try VictoriaMetrics()
        let service = "relay_pair_\(UInt32.random(in: 0...UInt32.max))"
        let keys = "k-pair=\(service)"
        // The first relay holds what it takes for 3 s before forwarding: killed soon after it first answers,
        // it dies with lines only in its spool.
        let first = try RelayProcess(
            keys: keys,
            influx: influx,
            victoria: victoria,
            settings: ["APIHEALTH_FLUSH_DELAY_MS": "3000"]
        )
        let second = try RelayProcess(keys: keys, influx: influx, victoria: victoria)
        try await first.start()
        try await second.start()
        let balancer = try await VictoriaProcess.vmauth(
            config: """
                users:
                - bearer_token: "k-pair"
                  url_prefix:
                  - \(first.url.absoluteString)
                  - \(second.url.absoluteString)

                """
        )
        let run = Task {
            try await AppInstalls(
                installs: 60,
                influx: influx,
                victoria: victoria,
                service: service,
                relay: AppInstalls.Relay(url: balancer.url, key: "k-pair", bearer: true)
            ).run()
        }
        #expect(await waitUntil { Self.spooledLines(first.spool) > 0 })
        first.stop(signal: SIGKILL)
        let left = Self.spooledLines(first.spool)
        #expect(left > 0, "the killed relay had forwarded everything it took")
        try await first.start()
        let result = try await run.value
        // InfluxDB keeps one point per series and instant: a write the killed relay took but never
        // answered, taken again by the other, is stored once. VictoriaMetrics (without
        // `-dedup.minScrapeInterval`) keeps both copies of such a write, so there nothing may be missing.
        #expect(result.countedInInfluxDB == result.requestsMade, "\(result)")
        #expect(result.countedInVictoriaMetrics >= result.requestsMade, "\(result)")
        #expect(await waitUntil { Self.spooledLines(first.spool) == 0 && Self.spooledLines(second.spool) == 0 })
        first.stop()
        second.stop()
        balancer.stop()
    }

    /// Lines in a spool's segment files.
    static func spooledLines(_ spool: URL) -> Int {
        let files = (try? FileManager.default.contentsOfDirectory(at: spool, includingPropertiesForKeys: nil)) ?? []
        return files.filter { $0.lastPathComponent.hasSuffix(".lp") }.reduce(0) { total, file in
            total + ((try? Data(contentsOf: file))?.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) } ?? 0)
        }
    }
}
