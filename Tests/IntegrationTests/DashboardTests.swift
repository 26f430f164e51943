import APIHealthMetrics
import CoreMetrics
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

private let dashboards = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().appendingPathComponent("dashboards")

private func files(_ folder: String, _ suffix: String) throws -> [(name: String, text: String)] {
    let directory = dashboards.appendingPathComponent(folder)
    return try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(suffix) }.sorted()
        .map {
            ($0, try String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8))
        }
}

private func matches(_ pattern: String, in text: String) -> [String] {
    let regex = try! NSRegularExpression(pattern: pattern)
    return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
        Range($0.range(at: 1), in: text).map { String(text[$0]) }
    }
}

@Suite struct DashboardContractTests {
    static let measurements = Set([
        PointSchema.Measurement.request, PointSchema.Measurement.parseFailure, PointSchema.Measurement.agent,
    ])
    static let tags = Set(
        PointSchema.requestTags + PointSchema.parseFailureTags + PointSchema.agentTags + MetricsSchema.tags
    )
    static let fields = Set(
        PointSchema.requestFields + PointSchema.parseFailureFields + PointSchema.agentFields + MetricsSchema.fields
    )
    static let metricTypes: Set<String> = [
        MetricsSchema.MetricType.counter, MetricsSchema.MetricType.floatingPointCounter, MetricsSchema.MetricType.meter,
        MetricsSchema.MetricType.gauge, MetricsSchema.MetricType.recorder, MetricsSchema.MetricType.timer,
    ]
    static let fluxColumns: Set<String> = [
        "_time", "_value", "_field", "_measurement", "_start", "_stop", "_value_failures", "_value_requests",
        "quantile",
    ]

    @Test func everyNameTheQueriesUseIsOneTheSchemaEmits() throws {
        let influxQL = try files("influxql", ".influxql")
        let flux = try files("flux", ".flux")
        #expect(influxQL.count == 9 && flux.count == 9, "one file per panel in each language")
        #expect(
            Set(influxQL.map { $0.name.split(separator: ".")[0] }) == Set(flux.map { $0.name.split(separator: ".")[0] })
        )
        for file in influxQL {
            let query = file.text.split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
            let aliases = Set(matches(#"AS "([^"]+)""#, in: query))
            let fromMeasurements = matches(#"FROM "([^"]+)""#, in: query)
            // swift-metrics series are named by their label: those panels read every measurement (`FROM /.*/`)
            // and keep the factory's series by their `metric_type` tag.
            let metricTypes = matches(#""metric_type" = '([^']+)'"#, in: query)
            for type in metricTypes {
                #expect(Self.metricTypes.contains(type), "\(file.name): unknown metric_type \(type)")
            }
            if fromMeasurements.isEmpty {
                #expect(
                    !metricTypes.isEmpty && query.contains("FROM /.*/"),
                    "\(file.name) reads a measurement, or metrics by type"
                )
            }
            for name in fromMeasurements {
                #expect(Self.measurements.contains(name), "\(file.name): unknown measurement \(name)")
            }
            for name in Set(matches(#""([^"]+)""#, in: query)).subtracting(aliases).subtracting(fromMeasurements) {
                #expect(
                    Self.tags.contains(name) || Self.fields.contains(name) || aliases.contains(name),
                    "\(file.name): \(name) is not a tag or field the agent writes"
                )
            }
        }
        for file in flux {
            for name in matches(#"r\._measurement == "([^"]+)""#, in: file.text) {
                #expect(Self.measurements.contains(name), "\(file.name): unknown measurement \(name)")
            }
            for name in matches(#"r\._field == "([^"]+)""#, in: file.text) {
                #expect(Self.fields.contains(name), "\(file.name): unknown field \(name)")
            }
            for type in matches(#"r\.metric_type == "([^"]+)""#, in: file.text) {
                #expect(Self.metricTypes.contains(type), "\(file.name): unknown metric_type \(type)")
            }
            let columns =
                matches(#"columns: \[([^\]]*)\]"#, in: file.text).flatMap { matches(#""([^"]+)""#, in: $0) }
                + matches(#"\br\.([A-Za-z_][A-Za-z0-9_]*)"#, in: file.text)
            for name in columns where !["_measurement", "_field"].contains(name) {
                #expect(
                    Self.tags.contains(name) || Self.fluxColumns.contains(name),
                    "\(file.name): \(name) is not a tag the agent writes"
                )
            }
            #expect(
                file.text.contains("v.timeRangeStart") && file.text.contains("v.timeRangeStop")
                    && file.text.contains("v.bucket")
            )
        }
    }

    @Test func grafanaAndInfluxDBDashboardsCarryTheFluxFilesUnchanged() throws {
        let flux = Set(try files("flux", ".flux").map(\.text))
        let grafana =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: dashboards.appendingPathComponent("grafana/dashboards/apihealth.json"))
            ) as! [String: Any]
        let grafanaQueries = (grafana["panels"] as! [[String: Any]]).flatMap {
            ($0["targets"] as! [[String: Any]]).map { $0["query"] as! String }
        }
        #expect(
            Set(grafanaQueries.map { $0.replacingOccurrences(of: "\"${bucket}\"", with: "v.bucket") }) == flux,
            "run scripts/build-dashboards after changing a .flux file"
        )
        let template =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: dashboards.appendingPathComponent("influxdb/apihealth-template.json"))
            ) as! [[String: Any]]
        let charts = ((template.last!["spec"] as! [String: Any])["charts"] as! [[String: Any]])
        #expect(Set(charts.flatMap { ($0["queries"] as! [[String: Any]]).map { $0["query"] as! String } }) == flux)
        #expect(template.first?["kind"] as? String == "Variable")
    }

    @Test func theInfluxQLGrafanaDashboardCarriesTheInfluxQLFilesUnchanged() throws {
        let influxQL = Set(
            try files("influxql", ".influxql").map {
                $0.text.split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
            }
        )
        let grafana =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: dashboards.appendingPathComponent("grafana/dashboards/apihealth-influxql.json"))
            ) as! [String: Any]
        let panels = grafana["panels"] as! [[String: Any]]
        let queries = panels.flatMap { ($0["targets"] as! [[String: Any]]).map { $0["query"] as! String } }
        #expect(Set(queries) == influxQL, "run scripts/build-dashboards after changing a .influxql file")
        for panel in panels {
            #expect((panel["datasource"] as? [String: Any])?["uid"] as? String == "apihealth-influxql")
        }
        let provisioning = try String(
            contentsOf: dashboards.appendingPathComponent("grafana/provisioning/datasources/influxdb.yml"),
            encoding: .utf8
        )
        #expect(
            provisioning.contains("uid: apihealth-influxql") && provisioning.contains("version: InfluxQL"),
            "the InfluxQL data source the dashboard names is provisioned"
        )
    }
}

/// The InfluxQL panels, run against a real InfluxDB 1.x holding a known data set written by the agent.
@Suite struct InfluxQLDashboardTests {
    struct Sample {
        var host: String
        var path: String
        var rawPath: String
        var module: String
        var status: Int?
        var duration: Double
    }

    static func dataSet() -> [Sample] {
        (0..<240).map { index in
            let host = index % 3 == 0 ? "api-b.example.com" : "api-a.example.com"
            let users = index % 2 == 0
            let status: Int? = index % 23 == 0 ? nil : index % 10 == 0 ? 500 : index % 17 == 0 ? 404 : 200
            return Sample(
                host: host,
                path: users ? "/users/{id}" : "/search",
                rawPath: users ? "/users/\(1_000 + index)" : "/search",
                module: users ? "accounts" : "search",
                status: status,
                duration: Double((index * 37) % 101) + 0.25
            )
        }
    }

    /// InfluxDB's nearest-rank percentile.
    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        let index = min(max(Int((Double(sorted.count) * p / 100 + 0.5).rounded(.down)) - 1, 0), sorted.count - 1)
        return sorted[index]
    }

    /// The panel interval the queries run with: one bucket holds the whole data set.
    static let intervalSeconds = 86_400_000

    static func query(_ name: String) throws -> String {
        let text = try String(
            contentsOf: dashboards.appendingPathComponent("influxql/\(name).influxql"),
            encoding: .utf8
        )
        return text.split(separator: "\n").filter { !$0.hasPrefix("--") }.joined(separator: "\n")
            .replacingOccurrences(of: "$timeFilter", with: "time >= now() - 1h AND time <= now() + 1m")
            .replacingOccurrences(of: "$__interval_ms", with: "\(Self.intervalSeconds * 1_000)")
            .replacingOccurrences(of: "$__interval", with: "\(Self.intervalSeconds)s")
    }

    @Test func everyPanelMatchesTheNumbersComputedFromTheDataSet() async throws {
        let influx = try await InfluxDB1.freshDatabase("dashboards")
        var configuration = APIHealthConfiguration(
            serviceName: "dashboards",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = nil
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "dashboards"))
        agent.start()
        let samples = Self.dataSet()
        let now = Date()
        var parseFailures: [String: Int] = [:]
        for (index, sample) in samples.enumerated() {
            let url = URL(string: "https://\(sample.host)\(sample.rawPath)")!
            agent.record(
                RequestSample(
                    method: "GET",
                    url: url,
                    module: sample.module,
                    startedAt: now.addingTimeInterval(-600 + Double(index)),
                    duration: .microseconds(Int64(sample.duration * 1_000)),
                    statusCode: sample.status,
                    error: sample.status == nil
                        ? RequestSample.TransportError(domain: "NSURLErrorDomain", code: -1001) : nil
                )
            )
            if sample.status == 200 && index % 11 == 0 {
                agent.recordParseFailure(
                    for: URLRequest(url: url),
                    response: nil,
                    error: DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "x")),
                    module: sample.module,
                    data: Data("<html>".utf8)
                )
                parseFailures["\(sample.host) \(sample.module) \(sample.path)", default: 0] += 1
            }
        }
        await agent.shutdown(deadline: .seconds(60))
        #expect(agent.metrics.pointsRejected == 0)

        // Latency percentiles by host and path.
        let latency = try await influx.query(try Self.query("latency_percentiles"))
        let groups = Dictionary(grouping: samples) { "\($0.host) \($0.path)" }
        #expect(latency.count == groups.count)
        for series in latency {
            let key = "\(series.tags["host"]!) \(series.tags["path"]!)"
            let durations = try #require(groups[key]).map(\.duration)
            let row = try #require(series.rows.first)
            for (column, p) in [("p50", 50.0), ("p95", 95.0), ("p99", 99.0)] {
                #expect((row[column] as? NSNumber)?.doubleValue == Self.percentile(durations, p), "\(key) \(column)")
            }
        }

        // Requests per second by module: the count in the interval over the interval's seconds (as in Flux).
        func perSecond(_ series: [InfluxDB1.Series], tag: String, column: String) -> [String: Double] {
            Dictionary(
                uniqueKeysWithValues: series.map {
                    ($0.tags[tag]!, ($0.rows.first?[column] as? NSNumber)?.doubleValue ?? -1)
                }
            )
        }
        func matches(_ measured: [String: Double], _ counts: [String: Int]) -> Bool {
            Set(measured.keys) == Set(counts.keys)
                && counts.allSatisfy {
                    abs(measured[$0.key]! - Double($0.value) / Double(Self.intervalSeconds)) < 1e-15
                }
        }
        let rate = perSecond(
            try await influx.query(try Self.query("request_rate")),
            tag: "module",
            column: "requests_per_second"
        )
        let perModule = Dictionary(grouping: samples, by: \.module).mapValues(\.count)
        #expect(matches(rate, perModule), "\(rate) vs \(perModule) per \(Self.intervalSeconds) s")

        // Failed requests per second by status class.
        let errors = perSecond(
            try await influx.query(try Self.query("error_rate_by_status_class")),
            tag: "status_class",
            column: "errors_per_second"
        )
        let failed = samples.filter { ($0.status ?? 600) >= 400 }
        let perClass = Dictionary(grouping: failed) { $0.status.map { "\($0 / 100)xx" } ?? "error" }.mapValues(\.count)
        #expect(matches(errors, perClass), "\(errors) vs \(perClass) per \(Self.intervalSeconds) s")

        // Availability per host.
        let availability = try await influx.query(try Self.query("availability"))
        for series in availability {
            let host = series.tags["host"]!
            let hostSamples = samples.filter { $0.host == host }
            let expected =
                1 - Double(hostSamples.filter { ($0.status ?? 600) >= 400 }.count) / Double(hostSamples.count)
            let value = try #require((series.rows.first?["availability"] as? NSNumber)?.doubleValue)
            #expect(abs(value - expected) < 1e-12, "\(host): \(value) vs \(expected)")
        }
        #expect(availability.count == 2)

        // Parse failures and requests by module and endpoint (two statements).
        let parseQuery = try Self.query("parse_failure_rate")
        let statements = parseQuery.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(statements.count == 2)
        let failureSeries = try await influx.query(statements[0])
        let requestSeries = try await influx.query(statements[1])
        let measuredFailures = Dictionary(
            uniqueKeysWithValues: failureSeries.map {
                (
                    "\($0.tags["host"]!) \($0.tags["module"]!) \($0.tags["path"]!)",
                    ($0.rows.first?["parse_failures"] as? NSNumber)?.intValue ?? -1
                )
            }
        )
        #expect(measuredFailures == parseFailures, "endpoints of different hosts stay apart")
        let measuredRequests = Dictionary(
            uniqueKeysWithValues: requestSeries.map {
                (
                    "\($0.tags["host"]!) \($0.tags["module"]!) \($0.tags["path"]!)",
                    ($0.rows.first?["requests"] as? NSNumber)?.intValue ?? -1
                )
            }
        )
        #expect(
            measuredRequests
                == Dictionary(grouping: samples) { "\($0.host) \($0.module) \($0.path)" }.mapValues(\.count)
        )

        // The slowest endpoints.
        let slowest = try await influx.query(try Self.query("slowest_endpoints"))
        let rows = try #require(slowest.first).rows
        let expectedTop = groups.map { (key: $0.key, p95: Self.percentile($0.value.map(\.duration), 95)) }
        #expect(rows.count == expectedTop.count)
        for row in rows {
            let key = "\(row["host"] as! String) \(row["path"] as! String)"
            #expect((row["p95"] as? NSNumber)?.doubleValue == expectedTop.first { $0.key == key }?.p95, "\(key)")
        }
        // Slowest first, as Flux's top() ranks them.
        let ranked = rows.compactMap { ($0["p95"] as? NSNumber)?.doubleValue }
        #expect(ranked == expectedTop.map(\.p95).sorted(by: >), "\(ranked)")

        // The agent's own health.
        let health = try await influx.query(try Self.query("agent_health"))
        #expect(health.first?.tags["service"] == "dashboards")
        #expect((health.first?.rows.last?["dropped"] as? NSNumber)?.intValue == 0)
        #expect((health.first?.rows.last?["rejected"] as? NSNumber)?.intValue == 0)
    }

    @Test func theMetricsPanelsGiveATimersP99AndACountersRateByLabel() async throws {
        let influx = try await InfluxDB1.freshDatabase("dashboards_metrics")
        var configuration = APIHealthConfiguration(
            serviceName: "dashboards",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = nil
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "dashboards"))
        var options = APIHealthMetricsFactory.Configuration()
        options.interval = .seconds(3_600)  // one point per timer, at shutdown
        options.writesQuantiles = true  // the per-instance p99 panel reads them
        let factory = APIHealthMetricsFactory(agent: agent, configuration: options)
        agent.start()
        // Timers, through the factory: 1…1000 ms on one database, 1…100 ms on another, 5 ms under another label, with dots.
        for ms in 1...1_000 {
            CoreMetrics.Timer(label: "db_query", dimensions: [("db", "orders")], factory: factory).recordMilliseconds(
                ms
            )
        }
        for ms in 1...100 {
            CoreMetrics.Timer(label: "db_query", dimensions: [("db", "users")], factory: factory).recordMilliseconds(ms)
        }
        // A label with dots (as Hummingbird's are), written as given: the panels read measurements by type, not by name.
        CoreMetrics.Timer(label: "cache.get", dimensions: [], factory: factory).recordMilliseconds(5)
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
                agent.write(
                    Point(
                        measurement: label,
                        tags: tags,
                        fields: [Point.Field("count", .uint(UInt64(step * increment)))],
                        timestamp: timestamp
                    )
                )
            }
        }
        await agent.shutdown(deadline: .seconds(60))
        #expect(agent.metrics.pointsRejected == 0)

        func query(_ name: String, interval: Int) throws -> String {
            try Self.query(name).replacingOccurrences(of: "\(Self.intervalSeconds)s", with: "\(interval)s")
        }
        let p99 = try await influx.query(try query("metrics_timer_p99", interval: Self.intervalSeconds))
        let byLabel = Dictionary(
            uniqueKeysWithValues: p99.map { ($0.name, ($0.rows.first?["p99_ms"] as? NSNumber)?.doubleValue ?? -1) }
        )
        #expect(Set(byLabel.keys) == ["db_query", "cache.get"], "timers only, one series per label")
        #expect(abs(byLabel["db_query"]! - 990) <= 990 * 0.01, "the worst p99 of the label's series: \(byLabel)")
        #expect(byLabel["cache.get"] == 5)

        let rates = try await influx.query(try query("metrics_counter_rate", interval: 20))
        #expect(Set(rates.map(\.name)) == ["http_requests", "jobs_done"])
        for series in rates {
            let values = series.rows.compactMap { ($0["per_second"] as? NSNumber)?.doubleValue }
            #expect(values.count >= 4, "\(series.name): \(values)")
            #expect(values.allSatisfy { $0 == (series.name == "http_requests" ? 15 : 1) }, "\(series.name): \(values)")
        }
    }
}
