import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Benchmarking) @testable import APIHealth

/// Three replicas of one service, each recording 60 s of traffic (1,000 requests/s over five endpoints, at
/// a known latency distribution) with raw points for errors and slow requests only, into the real
/// VictoriaMetrics. The intervals are ended by the test (one every 10 s of the traffic's own time), so the
/// run takes seconds and every interval holds exactly the requests the test gave it.
@Suite struct FleetTests {
    struct Endpoint {
        let path: String
        let template: String
        /// The median duration, in microseconds; durations spread log-normally around it.
        let median: Double
    }

    static let endpoints = [
        Endpoint(path: "/users/{n}", template: "/users/{id}", median: 12_000),
        Endpoint(path: "/orders/{n}", template: "/orders/{id}", median: 35_000),
        Endpoint(path: "/search", template: "/search", median: 80_000),
        Endpoint(path: "/items/{n}/reviews", template: "/items/{id}/reviews", median: 150_000),
        Endpoint(path: "/reports/monthly", template: "/reports/monthly", median: 400_000),
    ]

    @Test func threeReplicasGiveExactCountsAndFleetQuantilesOnVictoriaMetrics() async throws {
        let victoria = try VictoriaMetrics()
        let name = "fleet_\(UInt32.random(in: 0...UInt32.max))"
        let interval: Int64 = 10_000_000_000
        // Six intervals ending at least a minute ago, on whole multiples of the interval.
        let start = (Int64(Date().timeIntervalSince1970) * 1_000_000_000 / interval - 12) * interval
        let requestsPerInterval = 10_000
        var generator = SeededGenerator(state: 27)
        // Per template and status class: requests made. Per template: every duration, in microseconds.
        var made: [String: [String: Int]] = [:]
        var durations: [String: [Int64]] = [:]
        var agents: [APIHealthAgent] = []
        for replica in 1...3 {
            var configuration = APIHealthConfiguration(
                serviceName: name,
                destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis"))
            )
            configuration.instance = "replica-\(replica)"
            configuration.globalTags = ["env": "test"]
            configuration.precision = .ms
            configuration.spool = nil
            configuration.measurement = "\(name)_request"
            configuration.agentMeasurement = "\(name)_agent"
            configuration.aggregation?.measurement = "\(name)_interval"
            configuration.capture.rawPoints = .errorsAndSlow
            configuration.selfMetricsInterval = noPeriodicHealthPoint
            let agent = try APIHealthAgent(
                configuration: configuration,
                logger: Logger(label: name),
                clock: ManualClock()
            )
            agent.start()
            agents.append(agent)
        }
        for index in 0..<6 {
            let intervalStart = start + Int64(index) * interval
            for agent in agents {
                for request in 0..<requestsPerInterval {
                    let endpoint = Self.endpoints[request % Self.endpoints.count]
                    let microseconds = max(100, Int64(endpoint.median * exp(0.5 * generator.nextGaussian())))
                    let roll = Double.random(in: 0..<1, using: &generator)
                    let status: Int? = roll < 0.001 ? nil : roll < 0.006 ? 500 : 200
                    let path = endpoint.path.replacingOccurrences(of: "{n}", with: "\(1 + request % 977)")
                    let offset = Int64.random(in: 0..<interval, using: &generator)
                    agent.record(
                        RequestSample(
                            method: "GET",
                            url: URL(string: "https://api.fleet.test\(path)")!,
                            module: "fleet",
                            startedAt: Date(timeIntervalSince1970: Double(intervalStart + offset) / 1e9),
                            duration: .microseconds(microseconds),
                            statusCode: status,
                            error: status == nil
                                ? RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1001) : nil
                        )
                    )
                    let statusClass = status.map { "\($0 / 100)xx" } ?? "error"
                    made[endpoint.template, default: [:]][statusClass, default: 0] += 1
                    durations[endpoint.template, default: []].append(microseconds)
                }
                agent.recordIntervalPoints(endingAt: Timestamp(nanosecondsSinceEpoch: intervalStart + interval))
            }
        }
        for agent in agents { await agent.shutdown(deadline: .seconds(60)) }

        // Points written: at most 1/40 of the requests, per replica.
        let requestsPerReplica = 6 * requestsPerInterval
        for agent in agents {
            let metrics = agent.metrics
            #expect(metrics.pendingLines == 0 && metrics.pointsDropped == 0 && metrics.pointsLost == 0)
            let ratio = Double(metrics.pointsWritten) / Double(requestsPerReplica)
            print(
                "fleet: \(agent.configuration.instance) wrote \(metrics.pointsWritten) points for \(requestsPerReplica) requests (1/\(Int(1 / ratio))): \(metrics.intervalPoints) interval points, \(requestsPerReplica - Int(metrics.requestsOnlyAggregated)) raw"
            )
            #expect(metrics.pointsWritten * 40 <= UInt64(requestsPerReplica), "\(metrics.pointsWritten) points")
        }

        // The interval counts add up to the requests made, per endpoint and status class, exactly.
        let counts = try await victoria.export(namePattern: "\(name)_interval_count")
        #expect(Set(counts.map { $0.labels["instance"] ?? "" }) == ["replica-1", "replica-2", "replica-3"])
        #expect(counts.allSatisfy { $0.labels["env"] == "test" && $0.labels["service"] == name })
        var stored: [String: [String: Int]] = [:]
        for series in counts {
            let template = series.labels["path"] ?? "?"
            stored[template, default: [:]][series.labels["status_class"] ?? "?", default: 0] += Int(
                series.values.reduce(0, +)
            )
        }
        #expect(stored == made)

        // No two points of one series share a timestamp: interval points, and the raw points kept.
        let everySeries =
            try await victoria.export(namePattern: "\(name)_interval_.*")
            + victoria.export(namePattern: "\(name)_request_duration_ms")
        #expect(everySeries.count > 0)
        for series in everySeries {
            #expect(Set(series.timestamps).count == series.timestamps.count, "\(series.labels)")
        }

        // Fleet quantiles per endpoint from VictoriaMetrics' query engine, over all three replicas: each lies
        // in the bucket holding the exact quantile of every recorded duration.
        let bounds = DurationBuckets(AggregationOptions.defaultDurationBoundaries).bounds.map { Double($0) / 1e6 }
        for quantile in [0.5, 0.95, 0.99] {
            let answer = try await victoria.query(
                Self.fleetQuantileQuery(quantile, measurement: "\(name)_interval", window: "70s"),
                at: Double(start + 6 * interval) / 1e9
            )
            #expect(answer.count == Self.endpoints.count, "\(answer)")
            for endpoint in Self.endpoints {
                let sorted = (durations[endpoint.template] ?? []).sorted()
                let rank = Int((quantile * Double(sorted.count)).rounded(.up))
                let exact = Double(sorted[max(rank, 1) - 1]) / 1_000
                let upper = bounds.first { $0 >= exact } ?? .infinity
                let lower = bounds.last { $0 < exact } ?? 0
                let fleet = try #require(answer.first { $0.labels["path"] == endpoint.template }, "\(answer)").value
                #expect(
                    lower <= fleet && fleet <= upper,
                    "p\(Int(quantile * 100)) of \(endpoint.template): \(fleet) ms, exact \(exact) ms in (\(lower), \(upper)]"
                )
            }
        }
    }

    /// The query the documentation ships for a fleet quantile per endpoint on VictoriaMetrics (RunningAtFleetScale.md).
    static func fleetQuantileQuery(_ quantile: Double, measurement: String, window: String) -> String {
        """
        histogram_quantile(\(quantile), sum by (le, host, path, method) (label_replace(sum_over_time({__name__=~"\(measurement)_le_.+"}[\(window)]) keep_metric_names, "le", "$1", "__name__", "\(measurement)_le_(.+)")))
        """
    }
}
