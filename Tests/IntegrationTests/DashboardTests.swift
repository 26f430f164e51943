import APIHealthMetrics
import Foundation
import Testing

@testable import APIHealth

private typealias Files = DashboardFiles

/// What the dashboards promise without a server: every name a query reads is one the agent writes, the generated
/// dashboards carry the query files unchanged, their variables are defined, and the raw-point panels say so.
@Suite struct DashboardContractTests {
    static let measurements = Set([
        PointSchema.Measurement.request, PointSchema.Measurement.parseFailure, PointSchema.Measurement.agent,
        PointSchema.Measurement.requestInterval, PointSchema.Measurement.relay,
    ])
    /// The global tag the dashboards filter and group by (`APIHEALTH_TAGS=env=prod`), beside `country`: the agent
    /// writes them when the service sets them, and a query that reads them must work without them.
    static let environmentTag = "env"
    static let tags = Set(
        PointSchema.requestTags + PointSchema.parseFailureTags + PointSchema.agentTags + PointSchema.intervalTags
            + PointSchema.relayTags + MetricsSchema.tags + [environmentTag, PointSchema.Tag.country]
    )
    /// The duration histogram of interval points and of swift-metrics timers, with the default bounds.
    static let bucketFields = Set(
        DurationBuckets(AggregationOptions.defaultDurationBoundaries).fieldNames
            + APIHealthMetricsFactory.Configuration().timerBuckets.map {
                MetricsSchema.Field.bucket(
                    Double($0.components.seconds) * 1e3 + Double($0.components.attoseconds) / 1e15
                )
            } + [MetricsSchema.Field.bucketInfinity]
    )
    static let fields = Set(
        PointSchema.requestFields + PointSchema.parseFailureFields + PointSchema.agentFields
            + PointSchema.intervalFields + PointSchema.objectiveIntervalFields
            + PointSchema.transportErrorIntervalFields + PointSchema.cacheIntervalFields + PointSchema.relayFields
            + MetricsSchema.fields
    ).union(bucketFields)
    static let metricTypes: Set<String> = [
        MetricsSchema.MetricType.counter, MetricsSchema.MetricType.floatingPointCounter, MetricsSchema.MetricType.meter,
        MetricsSchema.MetricType.gauge, MetricsSchema.MetricType.recorder, MetricsSchema.MetricType.timer,
    ]
    static let fluxColumns: Set<String> = [
        "_time", "_value", "_field", "_measurement", "_start", "_stop", "_value_failures", "_value_requests",
        "quantile", "le",
        // What to cache: the advised lifetime's record, and the waiting it saves, computed by the query.
        "advice", "saved_ms",
    ]
    /// The variables the Flux files read: InfluxDB's own, and the dashboards' (bucket, instance, env, country, host,
    /// group_by).
    static let fluxVariables: Set<String> = [
        "timeRangeStart", "timeRangeStop", "windowPeriod", "bucket", "instance", "env", "country", "host", "group_by",
    ]
    static let influxQLVariables: Set<String> = [
        "timeFilter", "__interval", "__interval_ms", "instance", "env", "country", "host", "group_by",
    ]
    /// The values of `group_by`: tags every point carries (env and country where the service sets them): a
    /// per-country split.
    static let groupByValues = ["service", "instance", "env", "country"]

    static let panelCount = 22

    @Test func everyNameTheQueriesUseIsOneTheSchemaEmits() throws {
        let influxQL = try Files.files("influxql", ".influxql")
        let flux = try Files.files("flux", ".flux")
        #expect(
            influxQL.count == Self.panelCount && flux.count == Self.panelCount,
            "one file per panel in each language"
        )
        #expect(
            Set(influxQL.map { $0.name.split(separator: ".")[0] }) == Set(flux.map { $0.name.split(separator: ".")[0] })
        )
        for file in influxQL {
            let query = Files.statements(file.text)
            let aliases = Set(Files.matches(#"AS "([^"]+)""#, in: query))
            let fromMeasurements = Files.matches(#"FROM "([^"]+)""#, in: query)
            // swift-metrics series are named by their label: those panels read every measurement (`FROM /.*/`)
            // and keep the factory's series by their `metric_type` tag.
            let metricTypes = Files.matches(#""metric_type" = '([^']+)'"#, in: query)
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
            for variable in Files.matches(#"\$([A-Za-z_]+)"#, in: query) {
                #expect(Self.influxQLVariables.contains(variable), "\(file.name): unknown variable $\(variable)")
            }
            let names = Set(Files.matches(#""([^"]+)""#, in: query)).subtracting(aliases).subtracting(fromMeasurements)
            for name in names where !name.hasPrefix("$") {
                #expect(
                    Self.tags.contains(name) || Self.fields.contains(name),
                    "\(file.name): \(name) is not a tag or field the agent writes"
                )
            }
        }
        for file in flux {
            for name in Files.matches(#"r\._measurement == "([^"]+)""#, in: file.text) {
                #expect(Self.measurements.contains(name), "\(file.name): unknown measurement \(name)")
            }
            let namedFields = Files.matches(#"r\._field == "([^"]+)""#, in: file.text)
            for name in namedFields {
                #expect(Self.fields.contains(name), "\(file.name): unknown field \(name)")
            }
            for type in Files.matches(#"r\.metric_type == "([^"]+)""#, in: file.text) {
                #expect(Self.metricTypes.contains(type), "\(file.name): unknown metric_type \(type)")
            }
            for variable in Files.matches(#"\bv\.([A-Za-z_]+)"#, in: file.text) {
                #expect(Self.fluxVariables.contains(variable), "\(file.name): unknown variable v.\(variable)")
            }
            // After a pivot, the fields it names are columns.
            let pivoted = file.text.contains("pivot(") ? Set(namedFields) : []
            let columns =
                Files.matches(#"columns: \[([^\]]*)\]"#, in: file.text).flatMap { Files.matches(#""([^"]+)""#, in: $0) }
                + Files.matches(#"\br\.([A-Za-z_][A-Za-z0-9_]*)"#, in: file.text)
            for name in columns where !["_measurement", "_field"].contains(name) {
                #expect(
                    Self.tags.contains(name) || Self.fluxColumns.contains(name) || pivoted.contains(name),
                    "\(file.name): \(name) is not a tag the agent writes"
                )
            }
            #expect(
                file.text.contains("v.timeRangeStart") && file.text.contains("v.timeRangeStop")
                    && file.text.contains("v.bucket")
            )
        }
    }

    /// The relay's row (four panels in each flavour) reads only the relay's health point and names only its
    /// fields, as ``PointSchema/relayFields`` has them; the refusals panel names every reason the relay counts.
    @Test func theRelayRowNamesTheRelaysFieldsAndEveryRefusalReason() throws {
        typealias F = PointSchema.RelayField
        let relayFields = Set(PointSchema.relayFields)
        let reasons = Set((F.lineRefusalReasons + F.writeRefusalReasons).map(F.refused))
        for (folder, fieldPattern) in [
            ("flux", #"r\._field == "([^"]+)""#), ("influxql", #"last\("([^"]+)"\)"#),
            ("metricsql", #"__name__=~"([^"]+)""#),
        ] {
            let files = try Files.files(folder, "." + folder).filter { $0.name.hasPrefix("relay_") }
            #expect(
                files.map { $0.name.split(separator: ".")[0] }.sorted() == [
                    "relay_lines", "relay_pending", "relay_refused", "relay_throttled",
                ]
            )
            for file in files {
                var names = Files.matches(fieldPattern, in: file.text)
                if folder == "metricsql" {
                    // `apihealth_relay_(a|b)`: the series <measurement>_<field> of each field.
                    names = names.flatMap { pattern -> [String] in
                        let parts = pattern.split(separator: "(", maxSplits: 1)
                        let prefix = String(parts[0]).dropFirst(PointSchema.Measurement.relay.count + 1)
                        return parts[1].dropLast().split(separator: "|").map { String(prefix + $0) }
                    }
                }
                #expect(!names.isEmpty, "\(folder)/\(file.name)")
                for name in names { #expect(relayFields.contains(name), "\(folder)/\(file.name): \(name)") }
                #expect(file.text.contains(PointSchema.Measurement.relay), "\(folder)/\(file.name)")
                #expect(!file.text.contains(PointSchema.Measurement.requestInterval), "\(folder)/\(file.name)")
                if file.name.hasPrefix("relay_refused") {
                    #expect(Set(names) == reasons, "\(folder)/\(file.name): every reason, nothing else")
                }
            }
        }
    }

    /// Flux's `histogramQuantile()` cannot run here (no InfluxDB 2): the panels that call it are checked for the
    /// steps it needs, and every bucket field the agent writes for what those steps do with its name.
    @Test func theFluxQuantilePanelsSumEveryBucketAndReadItsBound() throws {
        let quantilePanels = try Files.files("flux", ".flux").filter { $0.text.contains("|> histogramQuantile(") }
        #expect(
            Set(quantilePanels.map(\.name)) == [
                "endpoint_latency.flux", "slowest_endpoints.flux", "metrics_timer_latency.flux",
            ]
        )
        for file in quantilePanels {
            let text = file.text
            let steps = [
                // Every bucket field and nothing else.
                #"r._field =~ /^le_/"#,
                // Summed over the window (or the range) and the instances: one histogram per endpoint or label.
                text.contains("aggregateWindow(") ? "fn: sum" : "|> sum()",
                // The count as a float, the bound from the field's name, +Inf for le_inf.
                #"_value: float(v: r._value)"#,
                #"le: if r._field == "le_inf" then float(v: "+Inf") else float(v: strings.trimPrefix(v: r._field, prefix: "le_"))"#,
                #"import "strings""#,
            ]
            for step in steps {
                #expect(text.contains(step), "\(file.name) lacks \(step)")
            }
            // The table histogramQuantile() reads holds one histogram: grouped without _field, with _time when
            // it windows.
            let beforeQuantile = text.components(separatedBy: "|> histogramQuantile(")[0]
            let groups = Files.matches(#"group\(columns: \[([^\]]*)\]\)"#, in: beforeQuantile)
            let summed = try #require(groups.dropLast().last, "\(file.name) groups before it sums")
            let histogram = try #require(groups.last, "\(file.name) groups the buckets into histograms")
            #expect(summed.contains(#""_field""#) && !histogram.contains(#""_field""#), "\(file.name): \(histogram)")
            #expect(!text.contains("aggregateWindow(") || histogram.contains(#""_time""#), "\(file.name): \(histogram)")
        }
        let latency = try Files.flux("endpoint_latency")
        #expect(
            Files.matches(#"percentile\(q: ([0-9.]+), name"#, in: latency) == ["0.50", "0.95", "0.99"]
        )
        // `r._field =~ /^le_/` selects exactly the histogram of interval points, and each field's bound reads back.
        let intervalFields = PointSchema.intervalFields
        #expect(
            Set(intervalFields.filter { $0.hasPrefix("le_") })
                == Set(DurationBuckets(AggregationOptions.defaultDurationBoundaries).fieldNames)
        )
        #expect(!MetricsSchema.fields.contains { $0.hasPrefix("le_") }, "no other timer field looks like a bucket")
        for field in Self.bucketFields where field != PointSchema.IntervalField.bucketInfinity {
            let bound = Double(field.dropFirst("le_".count))
            #expect(bound != nil && bound! > 0, "\(field) reads back as its bound")
        }
        let bounds = DurationBuckets(AggregationOptions.defaultDurationBoundaries).fieldNames.dropLast()
            .map { Double($0.dropFirst(3))! }
        #expect(bounds == bounds.sorted() && bounds.contains(300), "the within-300-ms panels read an exact bound")
    }

    @Test func intervalPanelsPutEachIntervalInTheWindowItsRequestsWereMadeIn() throws {
        // Interval points are stamped at their interval's end: a window (start, end] holds the intervals that
        // ended in it, which is a 1 ns offset on InfluxDB's [start, end) windows.
        for file in try Files.files("influxql", ".influxql") where file.text.contains("\"apihealth_request_interval\"")
        {
            let query = Files.statements(file.text)
            #expect(!query.contains("time($__interval)"), "\(file.name)")
        }
        for file in try Files.files("flux", ".flux") where file.text.contains("\"apihealth_request_interval\"") {
            let windows = file.text.components(separatedBy: "aggregateWindow(").dropFirst()
            #expect(windows.allSatisfy { $0.hasPrefix("every: every, offset: 1ns,") }, "\(file.name)")
        }
    }

    @Test func panelsThatNeedRawPointsSayItInTheirTitle() throws {
        func readsRawPoints(_ query: String) -> Bool {
            query.contains(#"FROM "apihealth_request" "#) || query.contains(#"r._measurement == "apihealth_request" "#)
        }
        var titled: [(title: String, query: String)] = []
        for name in ["grafana/dashboards/apihealth.json", "grafana/dashboards/apihealth-influxql.json"] {
            let dashboard = try #require(try Files.json(name) as? [String: Any])
            for panel in dashboard["panels"] as! [[String: Any]] where panel["type"] as? String != "row" {
                let query = ((panel["targets"] as! [[String: Any]]).first!["query"] as! String)
                titled.append((panel["title"] as! String, query))
                #expect((panel["description"] as? String)?.isEmpty == false, "\(panel["title"]!) describes itself")
            }
        }
        for chart in try Self.templateCharts() where chart["kind"] as? String != "Markdown" {
            titled.append((chart["name"] as! String, (chart["queries"] as! [[String: Any]]).first!["query"] as! String))
        }
        #expect(titled.count == 3 * Self.panelCount)
        for (title, query) in titled {
            #expect(readsRawPoints(query) == title.hasPrefix("Raw points:"), "\(title)")
        }
        #expect(titled.filter { readsRawPoints($0.query) }.count == 3 * 3)
    }

    /// The "What to cache" table has the same columns in every flavour and lists the endpoints where a cache would
    /// have saved the most waiting first: the Flux query sorts its rows, Grafana sorts the InfluxQL and MetricsQL
    /// tables, and makes the MetricsQL series (one per endpoint and measure) one row per endpoint.
    @Test func theWhatToCacheTablesHaveTheSameColumnsAndPutTheMostSavedFirst() throws {
        let columns = DashboardDataSet.whatToCacheColumns
        let flux = try Files.flux("what_to_cache")
        let fluxRow = try #require(flux.components(separatedBy: "|> map(fn: (r) => ({").last)
        #expect(Files.matches(#"([a-z0-9_]+): r\."#, in: fluxRow) == ["host", "method", "path"] + columns)
        #expect(flux.contains(#"|> sort(columns: ["saved_ms"], desc: true)"#))
        #expect(fluxRow.contains("saved_ms: r.advice.saved,"))
        #expect(Files.matches(#"AS "([^"]+)""#, in: try Files.influxQL("what_to_cache")) == columns)
        let metricsQL = try MetricsQLDashboardTests.file("what_to_cache")
        #expect(Files.matches(#""measure", "([^"]+)"\)"#, in: metricsQL) == columns)

        for name in ["apihealth-influxql", "apihealth-victoriametrics"] {
            let dashboard = try #require(try Files.json("grafana/dashboards/\(name).json") as? [String: Any])
            let panel = try #require(
                (dashboard["panels"] as! [[String: Any]]).first {
                    ($0["description"] as? String)?.hasPrefix("What to cache") == true
                },
                "\(name)"
            )
            #expect(panel["type"] as? String == "table")
            let sortBy = (panel["options"] as? [String: Any])?["sortBy"] as? [[String: Any]]
            #expect(sortBy?.count == 1 && sortBy?.first?["displayName"] as? String == "saved_ms", "\(name)")
            #expect(sortBy?.first?["desc"] as? Bool == true, "\(name)")
            guard name == "apihealth-victoriametrics" else { continue }
            let transformations = try #require(panel["transformations"] as? [[String: Any]])
            #expect(transformations.map { $0["id"] as? String } == ["labelsToFields", "merge", "organize"])
            #expect((transformations[0]["options"] as? [String: Any])?["valueLabel"] as? String == "measure")
            let order = ((transformations[2]["options"] as? [String: Any])?["indexByName"] as? [String: Int]) ?? [:]
            #expect(order.sorted { $0.value < $1.value }.map(\.key) == ["host", "method", "path"] + columns)
            let target = try #require((panel["targets"] as? [[String: Any]])?.first)
            #expect(target["instant"] as? Bool == true && target["format"] as? String == "time_series")
        }
    }

    static func templateCharts() throws -> [[String: Any]] {
        let template = try #require(try Files.json("influxdb/apihealth-template.json") as? [[String: Any]])
        let dashboard = try #require(template.first { $0["kind"] as? String == "Dashboard" })
        return (dashboard["spec"] as! [String: Any])["charts"] as! [[String: Any]]
    }

    @Test func grafanaAndInfluxDBDashboardsCarryTheFluxFilesUnchanged() throws {
        let flux = Set(try Files.files("flux", ".flux").map(\.text))
        let grafana = try #require(try Files.json("grafana/dashboards/apihealth.json") as? [String: Any])
        let panels = (grafana["panels"] as! [[String: Any]]).filter { $0["type"] as? String != "row" }
        var grafanaQueries = Set<String>()
        for panel in panels {
            var query = (panel["targets"] as! [[String: Any]]).first!["query"] as! String
            for name in ["bucket", "instance", "env", "country", "host", "group_by"] {
                query = query.replacingOccurrences(of: "\"${\(name)}\"", with: "v.\(name)")
            }
            grafanaQueries.insert(query)
            #expect((panel["datasource"] as? [String: Any])?["uid"] as? String == "apihealth-influxdb")
        }
        #expect(grafanaQueries == flux, "run scripts/build-dashboards after changing a .flux file")

        // Grafana's variables: instance and env single-valued with "*" for all (the files compare
        // `v.instance == "*"`), group_by one of the tags every point carries.
        let variables = try Self.grafanaVariables(grafana)
        #expect(Set(variables.keys) == ["bucket", "instance", "env", "country", "host", "group_by"])
        for name in ["instance", "env", "country", "host"] {
            #expect(variables[name]?["allValue"] as? String == "*" && variables[name]?["multi"] as? Bool == false)
            #expect((variables[name]?["query"] as? String)?.contains("tag: \"\(name)\"") == true)
        }
        #expect(Self.customValues(variables["group_by"]) == Self.groupByValues)

        let charts = try Self.templateCharts().filter { $0["kind"] as? String != "Markdown" }
        #expect(Set(charts.flatMap { ($0["queries"] as! [[String: Any]]).map { $0["query"] as! String } }) == flux)
        let template = try #require(try Files.json("influxdb/apihealth-template.json") as? [[String: Any]])
        let templateVariables = Dictionary(
            uniqueKeysWithValues: template.filter { $0["kind"] as? String == "Variable" }.map {
                let spec = $0["spec"] as! [String: Any]
                return (spec["name"] as! String, spec)
            }
        )
        #expect(Set(templateVariables.keys) == ["bucket", "instance", "env", "country", "host", "group_by"])
        for name in ["instance", "env", "country", "host"] {
            let query = templateVariables[name]?["query"] as? String ?? ""
            #expect(query.contains(#"{_value: "*"}"#) && query.contains("tag: \"\(name)\""), "\(name): \(query)")
            #expect(templateVariables[name]?["selected"] as? [String] == ["*"])
        }
        #expect(templateVariables["group_by"]?["values"] as? [String] == Self.groupByValues)
        #expect(Self.groupByValues.allSatisfy { Self.tags.contains($0) })
    }

    @Test func theInfluxQLGrafanaDashboardCarriesTheInfluxQLFilesUnchanged() throws {
        let influxQL = Set(try Files.files("influxql", ".influxql").map { Files.statements($0.text) })
        let grafana = try #require(try Files.json("grafana/dashboards/apihealth-influxql.json") as? [String: Any])
        let panels = (grafana["panels"] as! [[String: Any]]).filter { $0["type"] as? String != "row" }
        let queries = panels.flatMap { ($0["targets"] as! [[String: Any]]).map { $0["query"] as! String } }
        #expect(Set(queries) == influxQL, "run scripts/build-dashboards after changing a .influxql file")
        for panel in panels {
            #expect((panel["datasource"] as? [String: Any])?["uid"] as? String == "apihealth-influxql")
        }
        // Several instances or environments at once: Grafana writes them as a regular expression, and All as `.*`,
        // which also matches a point without the tag.
        let variables = try Self.grafanaVariables(grafana)
        #expect(Set(variables.keys) == ["instance", "env", "country", "host", "group_by"])
        for name in ["instance", "env", "country", "host"] {
            #expect(variables[name]?["allValue"] as? String == ".*" && variables[name]?["multi"] as? Bool == true)
            #expect(
                variables[name]?["query"] as? String
                    == "SHOW TAG VALUES FROM \"\(PointSchema.Measurement.requestInterval)\" WITH KEY = \"\(name)\""
            )
        }
        #expect(Self.customValues(variables["group_by"]) == Self.groupByValues)
        for query in influxQL where query.contains("$instance") || query.contains("$env") {
            #expect(
                query.contains(#""instance" =~ /^$instance$/ AND "env" =~ /^$env$/ AND "country" =~ /^$country$/"#),
                "\(query)"
            )
        }
        let provisioning = try String(
            contentsOf: Files.folder.appendingPathComponent("grafana/provisioning/datasources/influxdb.yml"),
            encoding: .utf8
        )
        #expect(
            provisioning.contains("uid: apihealth-influxql") && provisioning.contains("version: InfluxQL"),
            "the InfluxQL data source the dashboard names is provisioned"
        )
    }

    static func grafanaVariables(_ dashboard: [String: Any]) throws -> [String: [String: Any]] {
        let list = try #require((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: list.map { ($0["name"] as! String, $0) })
    }

    static func customValues(_ variable: [String: Any]?) -> [String] {
        (variable?["query"] as? String ?? "").split(separator: ",").map(String.init)
    }
}
