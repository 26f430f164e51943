import APIHealthMetrics
import CoreMetrics
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// The VictoriaMetrics dashboard (dashboards/metricsql, a Prometheus datasource in Grafana): every panel's MetricsQL
/// run on the real VictoriaMetrics over the dashboard data set written by real agents, against the numbers computed
/// from the data set; the generated dashboard carries the query files unchanged.
@Suite struct MetricsQLDashboardTests {
    typealias Sample = DashboardDataSet.Sample

    static func file(_ name: String) throws -> String {
        try String(
            contentsOf: DashboardFiles.folder.appendingPathComponent("metricsql/\(name).metricsql"),
            encoding: .utf8
        )
    }

    /// A panel's query without its comment lines, as the dashboard carries it.
    static func statements(_ text: String) -> String {
        text.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A panel's query as Grafana sends it, with its variables set: `interval` seconds a step, `range` the time range.
    static func query(
        _ name: String,
        interval: Int,
        range: String = "1h",
        instance: String = ".*",
        env: String = ".*",
        country: String = ".*",
        groupBy: String = "service"
    ) throws -> String {
        statements(try file(name))
            .replacingOccurrences(of: "$__interval_ms", with: "\(interval * 1_000)")
            .replacingOccurrences(of: "$__interval", with: "\(interval)s")
            .replacingOccurrences(of: "$__range", with: range)
            .replacingOccurrences(of: "$instance", with: instance)
            .replacingOccurrences(of: "$env", with: env)
            .replacingOccurrences(of: "$country", with: country)
            .replacingOccurrences(of: "$host", with: ".*")
            .replacingOccurrences(of: "$group_by", with: groupBy)
    }

    @Test func theDashboardCarriesTheMetricsQLFilesAndNamesOnlyWhatTheAgentWrites() throws {
        let files = try DashboardFiles.files("metricsql", ".metricsql")
        let others = try DashboardFiles.files("flux", ".flux").map { $0.name.split(separator: ".")[0] }
        #expect(Set(files.map { $0.name.split(separator: ".")[0] }) == Set(others), "the same panels as Flux")
        let grafana = try #require(
            try DashboardFiles.json("grafana/dashboards/apihealth-victoriametrics.json") as? [String: Any]
        )
        let panels = (grafana["panels"] as! [[String: Any]]).filter { $0["type"] as? String != "row" }
        let expressions = Set(panels.flatMap { ($0["targets"] as! [[String: Any]]).map { $0["expr"] as! String } })
        #expect(expressions == Set(files.map { Self.statements($0.text) }), "run scripts/build-dashboards")
        for panel in panels {
            #expect((panel["datasource"] as? [String: Any])?["uid"] as? String == "apihealth-victoriametrics")
            #expect((panel["description"] as? String)?.isEmpty == false)
        }
        let variables = try DashboardContractTests.grafanaVariables(grafana)
        #expect(Set(variables.keys) == ["instance", "env", "country", "host", "group_by"])
        let provisioning = try String(
            contentsOf: DashboardFiles.folder.appendingPathComponent("grafana/provisioning/datasources/influxdb.yml"),
            encoding: .utf8
        )
        #expect(provisioning.contains("uid: apihealth-victoriametrics") && provisioning.contains("type: prometheus"))

        // Series names: <measurement>_<field> of what the agent writes.
        let fields = DashboardContractTests.fields.union(PointSchema.objectiveIntervalFields)
        for file in files {
            for name in DashboardFiles.matches(#"\b(apihealth_[a-z0-9_]+)\{"#, in: file.text) {
                let measurement = DashboardContractTests.measurements.sorted { $0.count > $1.count }
                    .first { name.hasPrefix($0 + "_") }
                let field = measurement.map { String(name.dropFirst($0.count + 1)) }
                #expect(field.map { fields.contains($0) } == true, "\(file.name): \(name)")
            }
        }
    }

    /// Per series (its labels `keys`, space-separated), the value.
    static func values(_ samples: [VictoriaMetrics.Sample], by keys: [String]) -> [String: Double] {
        Dictionary(
            samples.map { sample in (keys.map { sample.labels[$0] ?? "" }.joined(separator: " "), sample.value) },
            uniquingKeysWith: { first, _ in first }
        )
    }

    static func close(_ measured: [String: Double], _ expected: [String: Double]) -> Bool {
        Set(measured.keys) == Set(expected.keys)
            && expected.allSatisfy { abs(measured[$0.key]! - $0.value) <= 1e-9 * max(abs($0.value), 1e-300) }
    }

    @Test func everyPanelMatchesTheNumbersComputedFromTheDataSet() async throws {
        let victoria = try VictoriaMetrics()
        let service = "metricsql_\(UInt32.random(in: 0...UInt32.max))"
        let agents = try DashboardDataSet.agents(
            service: service,
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis")),
            precision: .ms
        )
        for agent in agents.values { agent.start() }
        let samples = DashboardDataSet.samples()
        let ends = DashboardDataSet.intervalEnds()
        let (parseFailures, cacheFields) = DashboardDataSet.recordGivingCacheAdvice(
            samples,
            through: agents,
            intervalEnds: ends
        )
        for agent in agents.values {
            await agent.shutdown(deadline: .seconds(60))
            #expect(agent.metrics.pointsDropped == 0 && agent.metrics.pendingLines == 0)
        }
        #expect(try await victoria.write(try DashboardDataSet.lines(cacheFields)).status == 204)
        #expect(try await victoria.invalidRows() == 0)
        let at = Double(ends.last!)
        let seconds = 3_600.0
        func run(
            _ name: String,
            groupBy: String = "service",
            instance: String = ".*",
            env: String = ".*",
            at: Double = at
        ) async throws
            -> [VictoriaMetrics.Sample]
        {
            // The shared server holds other tests' data: this service's series only.
            let query = try Self.query(name, interval: Int(seconds), instance: instance, env: env, groupBy: groupBy)
                .replacingOccurrences(of: #"env=~"\#(env)""#, with: #"env=~"\#(env)", service="\#(service)""#)
            return try await victoria.query(query, at: at)
        }
        func counts(_ samples: [Sample], by key: (Sample) -> String) -> [String: Double] {
            Dictionary(grouping: samples, by: key).mapValues { Double($0.count) }
        }
        let byEndpoint = Dictionary(grouping: samples, by: \.endpoint)

        let rate = Self.values(try await run("request_rate"), by: ["host", "method", "path"])
        #expect(Self.close(rate, counts(samples, by: \.endpoint).mapValues { $0 / seconds }), "\(rate)")
        let perInstance = Self.values(
            try await run("request_rate", groupBy: "instance"),
            by: ["host", "method", "path", "instance"]
        )
        #expect(
            Self.close(perInstance, counts(samples) { "\($0.endpoint) \($0.instance)" }.mapValues { $0 / seconds })
        )
        let replica2 = Self.values(
            try await run("request_rate", instance: "replica-2"),
            by: ["host", "method", "path"]
        )
        #expect(
            Self.close(
                replica2,
                counts(samples.filter { $0.instance == "replica-2" }, by: \.endpoint).mapValues { $0 / seconds }
            )
        )

        let ratio = Self.values(try await run("error_ratio"), by: ["host", "method", "path"])
        let expectedRatio: [String: Double] = byEndpoint.mapValues { endpointSamples -> Double in
            Double(endpointSamples.filter(\.failed).count) / Double(endpointSamples.count)
        }
        #expect(Self.close(ratio, expectedRatio), "\(ratio)")
        let errors = Self.values(try await run("error_rate_by_status_class"), by: ["status_class"])
        let failedPerSecond: [String: Double] = counts(samples.filter(\.failed), by: \.statusClass)
            .mapValues { $0 / seconds }
        #expect(Self.close(errors, failedPerSecond), "\(errors)")
        let availability = Self.values(try await run("availability"), by: ["host"])
        let byHost = Dictionary(grouping: samples, by: \.host)
        let expectedAvailability: [String: Double] = byHost.mapValues { hostSamples -> Double in
            1 - Double(hostSamples.filter(\.failed).count) / Double(hostSamples.count)
        }
        #expect(Self.close(availability, expectedAvailability), "\(availability)")
        let within = Self.values(try await run("within_300ms"), by: ["host", "method", "path"])
        let expectedWithin: [String: Double] = byEndpoint.mapValues { endpointSamples -> Double in
            Double(endpointSamples.filter { $0.duration <= 300 }.count) / Double(endpointSamples.count)
        }
        #expect(Self.close(within, expectedWithin), "\(within)")
        // Parse failures are stamped when they are recorded (now), after the last interval's end.
        let now = Date().timeIntervalSince1970 + 1
        let parse = Self.values(try await run("parse_failure_rate", at: now), by: ["host", "module", "path"])
        let requests = counts(samples) { "\($0.host) \($0.module) \($0.path)" }
        let expectedParse = parseFailures.reduce(into: [String: Double]()) {
            $0[$1.key] = Double($1.value) / requests[$1.key]!
        }
        #expect(Self.close(parse, expectedParse), "\(parse) vs \(expectedParse)")

        // Quantiles from the interval points' buckets: as the Flux panels compute them (HistogramQuantileDashboardTests).
        let bounds = HistogramQuantileDashboardTests.bounds
        for sample in try await run("endpoint_latency") {
            let endpoint = "\(sample.labels["host"]!) \(sample.labels["method"]!) \(sample.labels["path"]!)"
            let q = ["p50": 0.5, "p95": 0.95, "p99": 0.99][sample.labels["quantile"] ?? ""]!
            HistogramQuantileDashboardTests.check(
                sample.value,
                quantile: q,
                of: byEndpoint[endpoint]!.map(\.duration),
                bounds: bounds,
                endpoint
            )
        }
        let slowest = try await run("slowest_endpoints")
        #expect(slowest.count == byEndpoint.count)
        for sample in slowest {
            let endpoint = "\(sample.labels["host"]!) \(sample.labels["method"]!) \(sample.labels["path"]!)"
            HistogramQuantileDashboardTests.check(
                sample.value,
                quantile: 0.95,
                of: byEndpoint[endpoint]!.map(\.duration),
                bounds: bounds,
                endpoint
            )
        }

        // What to cache, per endpoint: one series per endpoint and measure, only the replicas giving cache advice
        // counted; staging (replica-3, without cache advice) has none.
        let advised = samples.filter { DashboardDataSet.cacheAdvice.contains($0.instance) }
        for (instance, env, kept) in [
            (".*", ".*", advised),
            ("replica-2", ".*", advised.filter { $0.instance == "replica-2" }),
            (".*", "prod", advised),
            (".*", "staging", []),
        ] {
            let measured = Self.values(
                try await run("what_to_cache", instance: instance, env: env),
                by: ["host", "method", "path", "measure"]
            )
            var expected: [String: Double] = [:]
            for (endpoint, endpointSamples) in Dictionary(grouping: kept, by: \.endpoint) {
                for (column, value) in DashboardDataSet.whatToCache(endpointSamples) {
                    expected["\(endpoint) \(column)"] = value
                }
            }
            #expect(Self.close(measured, expected), "instance \(instance), env \(env): \(measured)")
        }

        // Raw points (the replicas that write them): VictoriaMetrics interpolates within its log buckets (18 a
        // decade, 13.6 % wide), so its percentile lies between the neighbours of the exact one's rank, give or take
        // a bucket.
        let raw = DashboardDataSet.rawSamples()
        let rawGroups = Dictionary(grouping: raw) { "\($0.host) \($0.path)" }
        let percentiles = try await run("raw_latency_percentiles")
        #expect(percentiles.count == rawGroups.count * 3)
        for sample in percentiles {
            let key = "\(sample.labels["host"]!) \(sample.labels["path"]!)"
            let p = ["p50": 50.0, "p95": 95.0, "p99": 99.0][sample.labels["quantile"] ?? ""]!
            let sorted = rawGroups[key]!.map(\.duration).sorted()
            let rank = Int((Double(sorted.count) * p / 100).rounded(.up)) - 1
            let lower = sorted[max(rank - 1, 0)] / 1.14
            let upper = sorted[min(rank + 1, sorted.count - 1)] * 1.14
            #expect(
                lower <= sample.value && sample.value <= upper,
                "\(key) p\(Int(p)): \(sample.value), \(lower)...\(upper)"
            )
        }
        let slowestRequests = try await run("slowest_requests")
        let slowestBySeries = Dictionary(grouping: raw) {
            "\($0.host) \($0.method) \($0.path) \($0.statusTag) \($0.instance)"
        }.mapValues { $0.map(\.duration).max()! }
        #expect(
            slowestRequests.map(\.value).sorted() == Array(slowestBySeries.values.sorted().suffix(20)),
            "\(slowestRequests.map(\.value))"
        )
        let failed = Self.values(try await run("latest_errors"), by: ["host", "method", "path", "status", "instance"])
        #expect(
            failed
                == counts(raw.filter(\.failed)) {
                    "\($0.host) \($0.method) \($0.path) \($0.statusTag) \($0.instance)"
                }
        )

        // The agents' own health, one series per instance and field: written at shutdown, stamped with the time.
        let health = try await run("agent_health", at: now)
        #expect(Set(health.map { $0.labels["instance"] ?? "" }) == Set(DashboardDataSet.instances))
        #expect(
            Set(health.map { $0.labels["field"] ?? "" }) == [
                "points_dropped", "points_rejected", "retries", "pending_lines",
            ]
        )
        #expect(health.filter { $0.labels["field"] == "points_dropped" }.allSatisfy { $0.value == 0 })
    }

    @Test func theMetricsPanelsGiveATimersQuantilesAndACountersRateByLabel() async throws {
        let victoria = try VictoriaMetrics()
        let service = "metricsql_metrics_\(UInt32.random(in: 0...UInt32.max))"
        var options = APIHealthMetricsFactory.Configuration()
        options.interval = .seconds(3_600)  // one point per timer, at shutdown
        var agents: [APIHealthAgent] = []
        var factories: [APIHealthMetricsFactory] = []
        for instance in ["replica-1", "replica-2"] {
            var configuration = APIHealthConfiguration(
                serviceName: service,
                destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis"))
            )
            configuration.instance = instance
            configuration.precision = .ms
            configuration.spool = nil
            let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: service))
            factories.append(APIHealthMetricsFactory(agent: agent, configuration: options))
            agent.start()
            agents.append(agent)
        }
        // A timer on two replicas, 1...1000 ms and 1...100 ms; counters every 10 s: one label with two series (+100
        // and +50 each time), another with one (+10).
        var timed: [Double] = []
        for (index, top) in [1_000, 100].enumerated() {
            for ms in 1...top {
                CoreMetrics.Timer(label: "db_query", dimensions: [("db", "\(index)")], factory: factories[index])
                    .recordMilliseconds(ms)
                timed.append(Double(ms))
            }
        }
        let start = (Int64(Date().timeIntervalSince1970) / 20 - 15) * 20
        for step in 0..<12 {
            for (label, route, increment) in [
                ("http_requests", "a", 100), ("http_requests", "b", 50), ("jobs_done", "", 10),
            ] {
                // As the factory writes them, with the service and instance every point of the agent carries.
                let tags =
                    [
                        Point.Tag("instance", "replica-1"),
                        Point.Tag(MetricsSchema.Tag.metricType, MetricsSchema.MetricType.counter),
                    ] + (route.isEmpty ? [] : [Point.Tag("route", route)]) + [Point.Tag("service", service)]
                agents[0].write(
                    Point(
                        measurement: label,
                        tags: tags,
                        fields: [Point.Field("count", .uint(UInt64(step * increment)))],
                        timestamp: Timestamp(seconds: start + Int64(step) * 10)
                    )
                )
            }
        }
        for agent in agents {
            await agent.shutdown(deadline: .seconds(60))
            #expect(agent.metrics.pointsDropped == 0 && agent.metrics.pendingLines == 0)
        }
        func run(_ name: String, interval: Int, at time: Double) async throws -> [VictoriaMetrics.Sample] {
            let query = try Self.query(name, interval: interval)
                .replacingOccurrences(of: #"env=~".*""#, with: #"env=~".*", service="\#(service)""#)
            return try await victoria.query(query, at: time)
        }

        let timerBounds = options.timerBuckets.map {
            Double($0.components.seconds) * 1e3 + Double($0.components.attoseconds) / 1e15
        }
        let quantiles = try await run("metrics_timer_latency", interval: 3_600, at: Date().timeIntervalSince1970 + 1)
        #expect(quantiles.count == 3 && quantiles.allSatisfy { $0.labels["name"] == "db_query" }, "\(quantiles)")
        for sample in quantiles {
            let q = ["p50": 0.5, "p95": 0.95, "p99": 0.99][sample.labels["quantile"] ?? ""]!
            HistogramQuantileDashboardTests.check(sample.value, quantile: q, of: timed, bounds: timerBounds, "db_query")
        }
        // Increments per second over a 20 s window in the middle: 10 + 5 for http_requests, 1 for jobs_done.
        let rates = Self.values(
            try await run("metrics_counter_rate", interval: 20, at: Double(start + 65)),
            by: ["name"]
        )
        #expect(rates == ["http_requests": 15, "jobs_done": 1], "\(rates)")
    }
}
