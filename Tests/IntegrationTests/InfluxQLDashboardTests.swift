import APIHealthMetrics
import CoreMetrics
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// The InfluxQL panels, run against a real InfluxDB 1.x holding a known data set written by real agents: three
/// replicas with their interval points, two of them with raw points too.
@Suite struct InfluxQLDashboardTests {
    typealias Sample = DashboardDataSet.Sample

    /// InfluxDB's nearest-rank percentile.
    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        let index = min(max(Int((Double(sorted.count) * p / 100 + 0.5).rounded(.down)) - 1, 0), sorted.count - 1)
        return sorted[index]
    }

    /// The panel interval the queries run with unless a check says otherwise: one bucket holds the whole data set.
    static let intervalSeconds = 86_400_000

    /// A panel's query as Grafana sends it, with its variables set.
    static func query(
        _ name: String,
        interval: Int = intervalSeconds,
        instance: String = ".*",
        env: String = ".*",
        country: String = ".*",
        groupBy: String = "service"
    ) throws -> String {
        try DashboardFiles.influxQL(name)
            .replacingOccurrences(of: "$timeFilter", with: "time >= now() - 1h AND time <= now() + 1m")
            .replacingOccurrences(of: "$__interval_ms", with: "\(interval * 1_000)")
            .replacingOccurrences(of: "$__interval", with: "\(interval)s")
            .replacingOccurrences(of: "$instance", with: instance)
            .replacingOccurrences(of: "$env", with: env)
            .replacingOccurrences(of: "$country", with: country)
            .replacingOccurrences(of: "$host", with: ".*")
            .replacingOccurrences(of: "$group_by", with: groupBy)
    }

    static func number(_ row: [String: Any]?, _ column: String) -> Double? {
        (row?[column] as? NSNumber)?.doubleValue
    }

    /// Per series (its tags `keys`, space-separated), the first row's `column`.
    static func values(_ series: [InfluxDB1.Series], by keys: [String], column: String) -> [String: Double] {
        Dictionary(
            uniqueKeysWithValues: series.map { series in
                (keys.map { series.tags[$0] ?? "" }.joined(separator: " "), number(series.rows.first, column) ?? .nan)
            }
        )
    }

    static func close(_ measured: [String: Double], _ expected: [String: Double]) -> Bool {
        Set(measured.keys) == Set(expected.keys)
            && expected.allSatisfy { abs(measured[$0.key]! - $0.value) <= 1e-12 * max(abs($0.value), 1e-300) }
    }

    @Test func everyPanelMatchesTheNumbersComputedFromTheDataSet() async throws {
        let influx = try await InfluxDB1.freshDatabase("dashboards")
        let agents = try DashboardDataSet.agents(
            service: "dashboards",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
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
            #expect(agent.metrics.pointsRejected == 0 && agent.metrics.pointsDropped == 0)
        }
        let cacheLines = try DashboardDataSet.lines(cacheFields)
        #expect(try await influx.write(cacheLines).status == 204)
        #expect(try await influx.waitUntilQueryable(cacheLines))
        let seconds = Double(Self.intervalSeconds)
        func counts(_ samples: [Sample], by key: (Sample) -> String) -> [String: Double] {
            Dictionary(grouping: samples, by: key).mapValues { Double($0.count) }
        }

        // Requests per second by endpoint, from the interval points of every replica (replica-3 wrote no raw
        // points): the count in the window over the window's seconds. Split by instance, and filtered.
        let rate = Self.values(
            try await influx.query(try Self.query("request_rate")),
            by: ["host", "method", "path", "service"],
            column: "requests_per_second"
        )
        let perEndpoint = counts(samples) { "\($0.endpoint) dashboards" }.mapValues { $0 / seconds }
        #expect(Self.close(rate, perEndpoint), "\(rate) vs \(perEndpoint)")
        let perInstance = Self.values(
            try await influx.query(try Self.query("request_rate", groupBy: "instance")),
            by: ["host", "method", "path", "instance"],
            column: "requests_per_second"
        )
        let expectedPerInstance = counts(samples) { "\($0.endpoint) \($0.instance)" }.mapValues { $0 / seconds }
        #expect(Self.close(perInstance, expectedPerInstance), "\(perInstance)")
        for (instance, env, kept) in [
            ("replica-2", ".*", samples.filter { $0.instance == "replica-2" }),
            (".*", "staging", samples.filter { $0.instance == "replica-3" }),
            ("(replica-1|replica-3)", "prod", samples.filter { $0.instance == "replica-1" }),
        ] {
            let filtered = Self.values(
                try await influx.query(try Self.query("request_rate", instance: instance, env: env)),
                by: ["host", "method", "path"],
                column: "requests_per_second"
            )
            let expected = counts(kept, by: \.endpoint).mapValues { $0 / seconds }
            #expect(Self.close(filtered, expected), "instance \(instance), env \(env): \(filtered)")
        }

        // 10 s windows: each holds the one interval that ended in it, labelled with the interval's start.
        for series in try await influx.query(try Self.query("request_rate", interval: 10)) {
            let endpoint = "\(series.tags["host"]!) \(series.tags["method"]!) \(series.tags["path"]!)"
            let windows = series.rows.compactMap { row -> (time: Int64, value: Double)? in
                guard let value = Self.number(row, "requests_per_second"), value > 0 else { return nil }
                return ((row["time"] as! NSNumber).int64Value, value)
            }
            let expected = (0..<DashboardDataSet.intervals).map { interval in
                (
                    time: (ends[interval] - DashboardDataSet.intervalSeconds) * 1_000_000_000 + 1,
                    value: Double(samples.filter { $0.interval == interval && $0.endpoint == endpoint }.count) / 10
                )
            }
            #expect(windows.map(\.time) == expected.map(\.time), "\(endpoint)")
            #expect(windows.map(\.value) == expected.map(\.value), "\(endpoint)")
        }

        // The share of failed requests by endpoint, failed requests per second by status class, availability
        // per host.
        let ratio = Self.values(
            try await influx.query(try Self.query("error_ratio")),
            by: ["host", "method", "path"],
            column: "error_ratio"
        )
        let expectedRatio = Dictionary(grouping: samples, by: \.endpoint).mapValues {
            Double($0.filter(\.failed).count) / Double($0.count)
        }
        #expect(Self.close(ratio, expectedRatio), "\(ratio) vs \(expectedRatio)")
        let errors = Self.values(
            try await influx.query(try Self.query("error_rate_by_status_class")),
            by: ["status_class"],
            column: "errors_per_second"
        )
        let perClass = counts(samples.filter(\.failed), by: \.statusClass).mapValues { $0 / seconds }
        #expect(Self.close(errors, perClass), "\(errors) vs \(perClass)")
        let availability = Self.values(
            try await influx.query(try Self.query("availability")),
            by: ["host"],
            column: "availability"
        )
        let expectedAvailability = Dictionary(grouping: samples, by: \.host).mapValues {
            1 - Double($0.filter(\.failed).count) / Double($0.count)
        }
        #expect(Self.close(availability, expectedAvailability), "\(availability)")

        // Latency by endpoint: the mean and the slowest request of every replica's requests, and the share within
        // 300 ms (a bucket bound, so exact).
        let latency = try await influx.query(try Self.query("endpoint_latency"))
        let byEndpoint = Dictionary(grouping: samples, by: \.endpoint)
        #expect(latency.count == byEndpoint.count)
        for series in latency {
            let endpoint = "\(series.tags["host"]!) \(series.tags["method"]!) \(series.tags["path"]!)"
            let durations = try #require(byEndpoint[endpoint]).map(\.duration)
            let mean = durations.reduce(0, +) / Double(durations.count)
            let measuredMean = try #require(Self.number(series.rows.first, "mean_ms"))
            #expect(abs(measuredMean - mean) <= 1e-9 * mean, "\(endpoint): \(measuredMean) vs \(mean)")
            #expect(Self.number(series.rows.first, "max_ms") == durations.max(), "\(endpoint)")
        }
        let within = Self.values(
            try await influx.query(try Self.query("within_300ms")),
            by: ["host", "method", "path"],
            column: "within_300ms"
        )
        let expectedWithin = byEndpoint.mapValues {
            Double($0.filter { $0.duration <= 300 }.count) / Double($0.count)
        }
        #expect(Self.close(within, expectedWithin), "\(within) vs \(expectedWithin)")
        #expect(expectedWithin.values.contains { $0 < 1 }, "some requests of the data set take longer than 300 ms")

        // The slowest endpoints by mean, slowest first.
        let slowest = try #require(try await influx.query(try Self.query("slowest_endpoints")).first).rows
        let expectedMeans = byEndpoint.mapValues { $0.map(\.duration).reduce(0, +) / Double($0.count) }
        #expect(slowest.count == expectedMeans.count)
        for row in slowest {
            let endpoint = "\(row["host"] as! String) \(row["method"] as! String) \(row["path"] as! String)"
            let mean = try #require(expectedMeans[endpoint])
            #expect(abs(Self.number(row, "mean_ms")! - mean) <= 1e-9 * mean, "\(endpoint)")
        }
        let ranked = slowest.compactMap { Self.number($0, "mean_ms") }
        #expect(ranked == ranked.sorted(by: >), "\(ranked)")

        // What to cache, per endpoint: only the replicas giving cache advice count, each filter keeps its part of
        // them, and staging (replica-3, without cache advice) has no row.
        let advised = samples.filter { DashboardDataSet.cacheAdvice.contains($0.instance) }
        for (instance, env, kept) in [
            (".*", ".*", advised),
            ("replica-2", ".*", advised.filter { $0.instance == "replica-2" }),
            (".*", "prod", advised),
            (".*", "staging", []),
        ] {
            let rows = try await influx.query(try Self.query("what_to_cache", instance: instance, env: env))
            let expected = Dictionary(grouping: kept, by: \.endpoint).mapValues(DashboardDataSet.whatToCache)
            #expect(rows.count == expected.count, "instance \(instance), env \(env)")
            for column in DashboardDataSet.whatToCacheColumns {
                let measured = Self.values(rows, by: ["host", "method", "path"], column: column)
                let wanted = expected.mapValues { $0[column]! }
                #expect(Self.close(measured, wanted), "instance \(instance), env \(env), \(column): \(measured)")
            }
        }

        // Parse failures, and the requests of their endpoints from the interval points (two statements).
        let statements = try Self.query("parse_failure_rate").split(separator: ";")
            .map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(statements.count == 2)
        let failures = Self.values(
            try await influx.query(statements[0]),
            by: ["host", "module", "path"],
            column: "parse_failures"
        )
        #expect(failures == parseFailures.mapValues(Double.init), "endpoints of different hosts stay apart")
        let requests = Self.values(
            try await influx.query(statements[1]),
            by: ["host", "module", "path"],
            column: "requests"
        )
        #expect(requests == counts(samples) { "\($0.host) \($0.module) \($0.path)" })

        // Raw points: the replicas that write them.
        let raw = DashboardDataSet.rawSamples()
        let rawLatency = try await influx.query(try Self.query("raw_latency_percentiles"))
        let rawGroups = Dictionary(grouping: raw) { "\($0.host) \($0.path)" }
        #expect(rawLatency.count == rawGroups.count)
        for series in rawLatency {
            let key = "\(series.tags["host"]!) \(series.tags["path"]!)"
            let durations = try #require(rawGroups[key]).map(\.duration)
            for (column, p) in [("p50", 50.0), ("p95", 95.0), ("p99", 99.0)] {
                #expect(Self.number(series.rows.first, column) == Self.percentile(durations, p), "\(key) \(column)")
            }
        }
        let slowestRequests = try #require(try await influx.query(try Self.query("slowest_requests")).first).rows
        #expect(
            slowestRequests.compactMap { Self.number($0, "duration_ms") }.sorted()
                == Array(raw.map(\.duration).sorted().suffix(20))
        )
        for row in slowestRequests {
            #expect(
                raw.contains {
                    $0.duration == Self.number(row, "duration_ms") && $0.host == row["host"] as? String
                        && $0.method == row["method"] as? String && $0.path == row["path"] as? String
                        && $0.statusTag == row["status"] as? String && $0.instance == row["instance"] as? String
                },
                "\(row)"
            )
        }
        let latestErrors = try #require(try await influx.query(try Self.query("latest_errors")).first).rows
        let expectedErrors = raw.filter(\.failed)
            .sorted { ($0.interval, $0.offset) > ($1.interval, $1.offset) }.prefix(20)
        #expect(
            latestErrors.map { "\($0["host"]!) \($0["path"]!) \($0["status"]!) \($0["instance"]!)" }
                == expectedErrors.map { "\($0.host) \($0.path) \($0.statusTag) \($0.instance)" }
        )
        #expect(latestErrors.compactMap { Self.number($0, "duration_ms") } == expectedErrors.map(\.duration))
        for (row, sample) in zip(latestErrors, expectedErrors) {
            #expect((row["error"] is String) == (sample.status == nil), "transport errors say which")
        }

        // The agents' own health, one series per instance.
        let health = try await influx.query(try Self.query("agent_health"))
        #expect(Set(health.map { $0.tags["instance"] ?? "" }) == Set(DashboardDataSet.instances))
        for series in health {
            #expect(series.tags["service"] == "dashboards")
            #expect(Self.number(series.rows.last, "dropped") == 0 && Self.number(series.rows.last, "rejected") == 0)
        }
    }

    @Test func theMetricsPanelsGiveATimersMeanAndMaxAndACountersRateByLabel() async throws {
        let influx = try await InfluxDB1.freshDatabase("dashboards_metrics")
        var options = APIHealthMetricsFactory.Configuration()
        options.interval = .seconds(3_600)  // one point per timer, at shutdown
        var agents: [APIHealthAgent] = []
        var factories: [APIHealthMetricsFactory] = []
        for instance in ["replica-1", "replica-2"] {
            var configuration = APIHealthConfiguration(
                serviceName: "dashboards",
                destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
            )
            configuration.instance = instance
            configuration.spool = nil
            let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "dashboards"))
            factories.append(APIHealthMetricsFactory(agent: agent, configuration: options))
            agent.start()
            agents.append(agent)
        }
        // Timers, through each replica's factory: 1…1000 ms on one database on replica-1, 1…100 ms on another on
        // replica-2, 5 ms under a label with dots on replica-1 (written as given: the panels read measurements by
        // type, not by name).
        for ms in 1...1_000 {
            CoreMetrics.Timer(label: "db_query", dimensions: [("db", "orders")], factory: factories[0])
                .recordMilliseconds(ms)
        }
        for ms in 1...100 {
            CoreMetrics.Timer(label: "db_query", dimensions: [("db", "users")], factory: factories[1])
                .recordMilliseconds(ms)
        }
        CoreMetrics.Timer(label: "cache.get", dimensions: [], factory: factories[0]).recordMilliseconds(5)
        // Counters as the factory writes them, at known times: every 10 s, one label with two series (+100 and
        // +50 each time), another with one (+10). A 20 s window holds two points of each series.
        let start = (Int64(Date().timeIntervalSince1970) / 20 - 15) * 20
        for step in 0..<12 {
            let timestamp = Timestamp(seconds: start + Int64(step) * 10)
            for (label, route, increment) in [
                ("http_requests", "a", 100), ("http_requests", "b", 50), ("jobs_done", "", 10),
            ] {
                let tags =
                    [Point.Tag(MetricsSchema.Tag.metricType, MetricsSchema.MetricType.counter)]
                    + (route.isEmpty ? [] : [Point.Tag("route", route)])
                agents[0].write(
                    Point(
                        measurement: label,
                        tags: tags,
                        fields: [Point.Field("count", .uint(UInt64(step * increment)))],
                        timestamp: timestamp
                    )
                )
            }
        }
        for agent in agents {
            await agent.shutdown(deadline: .seconds(60))
            #expect(agent.metrics.pointsRejected == 0)
        }

        // Mean and maximum by label over both replicas and every dimension: exact, unlike one replica's p99.
        func latency(instance: String) async throws -> [String: (mean: Double, max: Double)] {
            let series = try await influx.query(try Self.query("metrics_timer_latency", instance: instance))
            return Dictionary(
                uniqueKeysWithValues: series.map {
                    (
                        $0.name,
                        (Self.number($0.rows.first, "mean_ms") ?? .nan, Self.number($0.rows.first, "max_ms") ?? .nan)
                    )
                }
            )
        }
        let fleet = try await latency(instance: ".*")
        #expect(Set(fleet.keys) == ["db_query", "cache.get"], "timers only, one series per label")
        let mean = Double((1...1_000).reduce(0, +) + (1...100).reduce(0, +)) / 1_100
        #expect(abs(fleet["db_query"]!.mean - mean) <= 1e-9 * mean && fleet["db_query"]!.max == 1_000, "\(fleet)")
        #expect(fleet["cache.get"]!.mean == 5 && fleet["cache.get"]!.max == 5)
        let replica2 = try await latency(instance: "replica-2")
        #expect(
            Set(replica2.keys) == ["db_query"] && replica2["db_query"]!.mean == 50.5 && replica2["db_query"]!.max == 100
        )

        let rates = try await influx.query(try Self.query("metrics_counter_rate", interval: 20))
        #expect(Set(rates.map(\.name)) == ["http_requests", "jobs_done"])
        for series in rates {
            let values = series.rows.compactMap { Self.number($0, "per_second") }
            #expect(values.count >= 4, "\(series.name): \(values)")
            #expect(values.allSatisfy { $0 == (series.name == "http_requests" ? 15 : 1) }, "\(series.name): \(values)")
        }
    }
}
