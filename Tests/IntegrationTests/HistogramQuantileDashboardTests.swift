import APIHealthMetrics
import CoreMetrics
import Foundation
import TestSupport
import Testing

@testable import APIHealth

/// The Flux quantile panels cannot run here (no InfluxDB 2). Their computation (sum each bucket field over the
/// range and the instances, read the bound from the field's name, interpolate within the bucket holding the rank)
/// is the one PromQL's `histogram_quantile()` makes, so the same data set is written by real agents into the real
/// VictoriaMetrics and each panel's quantiles are asked of its query engine, with the grouping and filters read
/// from the Flux file: they must equal the quantiles of the bucket counts computed from the data set.
@Suite struct HistogramQuantileDashboardTests {
    typealias Sample = DashboardDataSet.Sample

    /// A Flux quantile panel as MetricsQL: its measurement, what it filters on, what it groups by, its quantiles.
    struct QuantilePanel {
        var measurement: String
        var groupBy: [String]
        var quantiles: [Double]
        var filtersInstance: Bool
        var metricType: String?

        init(flux name: String, groupBy variable: String = "service") throws {
            let text = try DashboardFiles.flux(name)
            let histogram = try #require(text.components(separatedBy: "percentile = ").first)
            let groups = DashboardFiles.matches(#"group\(columns: \[([^\]]*)\]\)"#, in: histogram)
            groupBy = try #require(groups.last).split(separator: ",").compactMap { item in
                let column = item.trimmingCharacters(in: .whitespaces)
                if column == "v.group_by" { return variable }
                let name = column.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                return ["_time", "_measurement"].contains(name) ? nil : name
            }
            measurement = DashboardFiles.matches(#"r\._measurement == "([^"]+)""#, in: text).first ?? ""
            metricType = DashboardFiles.matches(#"r\.metric_type == "([^"]+)""#, in: text).first
            quantiles = DashboardFiles.matches(#"percentile\(q: ([0-9.]+), name"#, in: text).compactMap(Double.init)
            filtersInstance = text.contains(#"(v.instance == "*" or r.instance == v.instance)"#)
        }

        /// The MetricsQL of quantile `q` over `window` for the series that `matchers` select.
        func query(_ q: Double, measurement: String? = nil, matchers: [String: String], window: String) -> String {
            let name = measurement ?? self.measurement
            let selector =
                ([#"__name__=~"\#(name)_le_.+""#]
                + matchers.sorted { $0.key < $1.key }.map { #"\#($0.key)="\#($0.value)""# })
                .joined(separator: ", ")
            return """
                histogram_quantile(\(q), sum by (\((["le"] + groupBy).joined(separator: ", "))) (label_replace(sum_over_time({\(selector)}[\(window)]) keep_metric_names, "le", "$1", "__name__", "\(name)_le_(.+)")))
                """
        }
    }

    /// One quantile panel's query with some variables set, and the samples it must see.
    struct Case {
        var panel: QuantilePanel
        var quantiles: [Double]
        var matchers: [String: String]
        var samples: [Sample]
        var series: Int
    }

    /// The durations of the samples whose host, method, path and instance are those of `labels`, where it has them.
    static func durations(_ samples: [Sample], matching labels: [String: String]) -> [Double] {
        samples.filter { sample in
            [("host", sample.host), ("method", sample.method), ("path", sample.path), ("instance", sample.instance)]
                .allSatisfy { labels[$0.0] == nil || labels[$0.0] == $0.1 }
        }.map(\.duration)
    }

    static let bounds = DurationBuckets(AggregationOptions.defaultDurationBoundaries).bounds.map { Double($0) / 1e6 }

    /// Checks one answer of VictoriaMetrics against the quantile of the histogram of `durations`.
    static func check(_ answer: Double, quantile q: Double, of durations: [Double], bounds: [Double], _ what: String) {
        let expected = DashboardDataSet.histogramQuantile(q, DashboardDataSet.histogram(durations, bounds: bounds))
        let tolerance = 1e-9 * max(expected.upperBound, 1)
        #expect(
            expected.lowerBound - tolerance <= answer && answer <= expected.upperBound + tolerance,
            "\(what) p\(Int(q * 100)): \(answer), expected \(expected)"
        )
        let bucket = DashboardDataSet.bucketOfExactQuantile(q, of: durations, bounds: bounds)
        #expect(
            bucket.lowerBound - tolerance <= answer && answer <= bucket.upperBound + tolerance,
            "\(what) p\(Int(q * 100)): \(answer) outside the exact quantile's bucket \(bucket)"
        )
    }

    @Test func theFluxQuantilePanelsGiveWhatVictoriaMetricsComputesFromTheSameBuckets() async throws {
        let victoria = try VictoriaMetrics()
        let service = "dashboards_\(UInt32.random(in: 0...UInt32.max))"
        // Interval points only: the quantiles need no raw point.
        let agents = try DashboardDataSet.agents(
            service: service,
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis")),
            precision: .ms,
            rawPoints: { _ in .none }
        )
        var options = APIHealthMetricsFactory.Configuration()
        options.interval = .seconds(3_600)  // one point per timer, at shutdown
        let factories = agents.mapValues { APIHealthMetricsFactory(agent: $0, configuration: options) }
        for agent in agents.values { agent.start() }
        let samples = DashboardDataSet.samples()
        let ends = DashboardDataSet.intervalEnds()
        DashboardDataSet.record(samples, through: agents, intervalEnds: ends)
        // A timer on two replicas: 1…1000 ms and 1…100 ms.
        var timed: [Double] = []
        for (instance, top) in [("replica-1", 1_000), ("replica-2", 100)] {
            for ms in 1...top {
                CoreMetrics.Timer(label: "db_query", dimensions: [("db", instance)], factory: factories[instance]!)
                    .recordMilliseconds(ms)
                timed.append(Double(ms))
            }
        }
        for agent in agents.values {
            await agent.shutdown(deadline: .seconds(60))
            #expect(agent.metrics.pointsDropped == 0 && agent.metrics.pendingLines == 0)
        }
        #expect(try await victoria.invalidRows() == 0)

        // Fleet p50/p95/p99 per endpoint, summed over the three replicas; per replica (group_by instance); for one
        // replica (the instance filter). Then the slowest endpoints' p95 over the range.
        let latency = try QuantilePanel(flux: "endpoint_latency")
        #expect(latency.groupBy == ["host", "method", "path", "service"] && latency.quantiles == [0.5, 0.95, 0.99])
        #expect(latency.measurement == PointSchema.Measurement.requestInterval && latency.filtersInstance)
        let perInstance = try QuantilePanel(flux: "endpoint_latency", groupBy: "instance")
        let slowest = try QuantilePanel(flux: "slowest_endpoints")
        #expect(slowest.groupBy == ["host", "method", "path"] && slowest.filtersInstance)
        let endpoints = Set(samples.map(\.endpoint)).count
        let replica2 = samples.filter { $0.instance == "replica-2" }
        let replicaEndpoints = Set(samples.map { "\($0.endpoint) \($0.instance)" }).count
        let cases = [
            Case(panel: latency, quantiles: latency.quantiles, matchers: [:], samples: samples, series: endpoints),
            Case(
                panel: perInstance,
                quantiles: latency.quantiles,
                matchers: [:],
                samples: samples,
                series: replicaEndpoints
            ),
            Case(
                panel: latency,
                quantiles: latency.quantiles,
                matchers: ["instance": "replica-2"],
                samples: replica2,
                series: endpoints
            ),
            Case(panel: slowest, quantiles: [0.95], matchers: [:], samples: samples, series: endpoints),
        ]
        for check in cases {
            for q in check.quantiles {
                let query = check.panel.query(
                    q,
                    matchers: check.matchers.merging(["service": service]) { $1 },
                    window: "1h"
                )
                let answer = try await victoria.query(query, at: Double(ends.last!))
                #expect(answer.count == check.series, "\(query): \(answer)")
                for series in answer {
                    Self.check(
                        series.value,
                        quantile: q,
                        of: Self.durations(check.samples, matching: series.labels),
                        bounds: Self.bounds,
                        "\(series.labels)"
                    )
                }
            }
        }

        // A swift-metrics timer's p50/p95/p99 by label, over both replicas and both dimensions.
        let timer = try QuantilePanel(flux: "metrics_timer_latency")
        #expect(timer.groupBy.isEmpty && timer.metricType == MetricsSchema.MetricType.timer && timer.filtersInstance)
        let timerBounds = options.timerBuckets.map {
            Double($0.components.seconds) * 1e3 + Double($0.components.attoseconds) / 1e15
        }
        for q in timer.quantiles {
            let answer = try await victoria.query(
                timer.query(
                    q,
                    measurement: "db_query",
                    matchers: ["service": service, "metric_type": timer.metricType!],
                    window: "1h"
                ),
                at: Date().timeIntervalSince1970 + 1
            )
            #expect(answer.count == 1, "\(answer)")
            Self.check(try #require(answer.first).value, quantile: q, of: timed, bounds: timerBounds, "db_query")
        }
    }
}
