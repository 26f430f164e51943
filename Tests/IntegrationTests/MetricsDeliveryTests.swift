import CoreMetrics
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@_spi(Package) @testable import APIHealth
@testable import APIHealthMetrics

/// swift-metrics handlers, aggregated by the factory and read back from a real InfluxDB 1.x.
@Suite struct MetricsDeliveryTests {
    struct Setup {
        var influx: InfluxDB1
        var agent: APIHealthAgent
        var factory: APIHealthMetricsFactory
    }

    static func setUp(
        _ name: String,
        interval: Duration,
        maximumSeries: Int = 10_000,
        quantiles: Bool = false
    ) async throws -> Setup {
        let influx = try await InfluxDB1.freshDatabase(name)
        var configuration = APIHealthConfiguration(
            serviceName: name,
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = nil
        configuration.batching.flushDelay = .milliseconds(100)
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: name))
        var options = APIHealthMetricsFactory.Configuration()
        options.interval = interval
        options.maximumSeries = maximumSeries
        options.writesQuantiles = quantiles
        let factory = APIHealthMetricsFactory(agent: agent, configuration: options)
        agent.start()
        return Setup(influx: influx, agent: agent, factory: factory)
    }

    static func number(_ value: Any?) -> Double? { (value as? NSNumber)?.doubleValue }

    /// swift-metrics labels with dots (Hummingbird's `hb.requests`, `http.server.request.duration`) are
    /// written with underscores when asked, so PromQL on VictoriaMetrics reads them unquoted; by default
    /// they are written as given.
    @Test func labelsWithDotsCanBeWrittenWithUnderscoresForPromQL() async throws {
        let victoria = try VictoriaMetrics()
        for underscored in [true, false] {
            let service = "dots_\(underscored)_\(UInt32.random(in: 0...UInt32.max))"
            var configuration = APIHealthConfiguration(
                serviceName: service,
                destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis"))
            )
            configuration.spool = nil
            let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: service))
            var options = APIHealthMetricsFactory.Configuration()
            options.interval = .seconds(3_600)  // one point per series, at shutdown
            options.writesUnderscoredNames = underscored
            let factory = APIHealthMetricsFactory(agent: agent, configuration: options)
            agent.start()
            Counter(
                label: "hb.requests",
                dimensions: [("http.route", "/users/{id}"), ("service", service)],
                factory: factory
            )
            .increment(by: 3)
            CoreMetrics.Timer(
                label: "http.server.request.duration",
                dimensions: [("service", service)],
                factory: factory
            )
            .recordMilliseconds(12)
            await agent.shutdown(deadline: .seconds(60))
            #expect(agent.metrics.pointsRejected == 0)

            func query(_ promQL: String) async throws -> [Double] {
                try await victoria.forceFlush()
                let reply = try await HTTP.send("GET", HTTP.url(victoria.base, "/api/v1/query", [("query", promQL)]))
                let object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
                let results = (object?["data"] as? [String: Any])?["result"] as? [[String: Any]] ?? []
                return results.compactMap { (($0["value"] as? [Any])?.last as? String).flatMap(Double.init) }
            }
            // Acknowledged is not yet searchable: wait for each answer.
            func answers(_ promQL: String, _ accept: @escaping ([Double]) -> Bool) async -> Bool {
                await waitUntil { accept((try? await query(promQL)) ?? []) }
            }
            let stored = try await victoria.export(matching: #"{service="\#(service)"}"#).map(\.labels)
            if underscored {
                // Plain PromQL, no quoting.
                #expect(
                    await answers(#"sum(hb_requests_count{service="\#(service)",http_route="/users/{id}"})"#) {
                        $0 == [3]
                    },
                    "\(stored)"
                )
                // The timer's histogram: its p99 lies in the bucket of the one value, 12 ms, which is (10, 12].
                let buckets = #"{__name__=~"http_server_request_duration_le_.+",service="\#(service)"}"#
                #expect(
                    await answers(
                        #"histogram_quantile(0.99, label_replace(\#(buckets), "le", "$1", "__name__", "http_server_request_duration_le_(.+)"))"#
                    ) { $0.count == 1 && (10...12).contains($0[0]) },
                    "\(stored)"
                )
            } else {
                #expect(
                    await answers(#"sum({__name__="hb.requests_count",service="\#(service)"})"#) { $0 == [3] },
                    "as given: \(stored)"
                )
            }
        }
    }

    @Test func countersAndMetersReportTheirValueEveryIntervalAndOnceMoreAtShutdown() async throws {
        let setup = try await Self.setUp("metrics_counters", interval: .milliseconds(250))
        let counter = Counter(label: "jobs_done", dimensions: [("queue", "mail")], factory: setup.factory)
        let floating = FloatingPointCounter(label: "bytes_sent", dimensions: [], factory: setup.factory)
        let meter = Meter(label: "queue_depth", dimensions: [("queue", "mail")], factory: setup.factory)
        var expected: Int64 = 0
        for round in 1...3 {
            counter.increment(by: Int64(round * 1_000))
            expected += Int64(round * 1_000)
            floating.increment(by: 0.25)
            meter.set(Double(round * 10))
            // The next round once this one's total is stored: each round ends in an interval of its own.
            let total = Double(expected)
            #expect(
                await waitUntil {
                    let stored = try? await setup.influx.query(#"SELECT last("count") FROM "jobs_done""#)
                    return Self.number(stored?.first?.values.first?[1]) == total
                },
                "round \(round)"
            )
        }
        // Points keep coming every interval with nothing new: wait for them rather than for a time.
        #expect(
            await waitUntil {
                let stored = try? await setup.influx.query(#"SELECT count("count") FROM "jobs_done""#)
                return ((stored?.first?.rows.first?["count"] as? NSNumber)?.intValue ?? 0) >= 6
            }
        )
        meter.increment(by: 2.5)
        meter.decrement(by: 1)
        counter.increment(by: 7)  // recorded after the last interval: only the shutdown flush ships it
        expected += 7
        await setup.agent.shutdown(deadline: .seconds(60))
        #expect(setup.agent.metrics.pointsRejected == 0 && setup.agent.metrics.pointsDropped == 0)

        let counts = try #require(
            try await setup.influx.query(#"SELECT "count" FROM "jobs_done" WHERE "metric_type" = 'counter'"#).first
        )
        let values = counts.values.compactMap { Self.number($0[1]) }
        #expect(values.count >= 6, "a point every interval, new data or not: \(values)")
        #expect(values == values.sorted(), "cumulative")
        #expect(values.last == Double(expected))
        #expect(counts.tags.isEmpty)
        let floatingValue = try await setup.influx.query(#"SELECT last("value") FROM "bytes_sent""#).first?.values
            .first?[1]
        #expect(Self.number(floatingValue) == 0.75)
        let meterValue = try await setup.influx.query(
            #"SELECT last("value") FROM "queue_depth" WHERE "queue" = 'mail'"#
        ).first?.values.first?[1]
        #expect(Self.number(meterValue) == 31.5)
    }

    @Test func timerQuantilesAreWithinTheStatedErrorOfTheExactOnes() async throws {
        let setup = try await Self.setUp("metrics_timer", interval: .seconds(3_600), quantiles: true)
        let timer = CoreMetrics.Timer(label: "db_query", dimensions: [("db", "orders")], factory: setup.factory)
        var random = SeededGenerator(state: 16)
        var samples: [Int64] = []
        samples.reserveCapacity(1_000_000)
        for _ in 0..<1_000_000 {
            // Log-normal around 2 ms, spanning microseconds to seconds.
            let nanoseconds = Int64(exp(log(2e6) + 1.5 * random.nextGaussian()).rounded())
            samples.append(nanoseconds)
            timer.recordNanoseconds(nanoseconds)
        }
        await setup.agent.shutdown(deadline: .seconds(60))

        let series = try await setup.influx.query(#"SELECT * FROM "db_query" WHERE "metric_type" = 'timer'"#)
        let row = try #require(series.first?.rows.first)
        #expect(series.first?.values.count == 1, "one interval, one point")
        #expect(row["db"] as? String == "orders")
        let sorted = samples.sorted()
        #expect(Self.number(row["count"]) == 1_000_000)
        // Milliseconds as the agent writes `duration_ms`: nanoseconds / 10⁶, exact in line protocol.
        #expect(Self.number(row["min"]) == Double(sorted.first!) / 1e6)
        #expect(Self.number(row["max"]) == Double(sorted.last!) / 1e6)
        let sum = samples.reduce(0.0) { $0 + Double($1) }
        #expect(Self.number(row["sum"]) == sum / 1e6)
        let mean = try #require(Self.number(row["mean"]))
        #expect(abs(mean - sum / 1_000_000 / 1e6) <= 1e-12 * mean, "the mean is not a whole number of nanoseconds")
        // The histogram: each bucket holds exactly the values at or below its bound.
        for bound in AggregationOptions.defaultDurationBoundaries {
            let nanoseconds = bound.components.seconds * 1_000_000_000 + bound.components.attoseconds / 1_000_000_000
            let field = MetricsSchema.Field.bucket(Double(nanoseconds) / 1e6)
            #expect(Self.number(row[field]) == Double(samples.count { $0 <= nanoseconds }), "\(field)")
        }
        #expect(Self.number(row[MetricsSchema.Field.bucketInfinity]) == 1_000_000)
        for (column, q) in [("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)] {
            let exact = Double(sorted[Int((q * Double(sorted.count)).rounded(.up)) - 1]) / 1e6  // nearest rank
            let measured = try #require(Self.number(row[column]))
            #expect(
                abs(measured - exact) / exact <= QuantileSketch.defaultRelativeAccuracy,
                "\(column): \(measured) vs \(exact)"
            )
        }
    }

    @Test func recordersWriteExactMinMaxSumAndNothingForIntervalsWithoutValues() async throws {
        let setup = try await Self.setUp("metrics_recorder", interval: .milliseconds(250))
        let recorder = Recorder(label: "payload_size", dimensions: [], aggregate: true, factory: setup.factory)
        let gauge = Gauge(label: "temperature", dimensions: [], factory: setup.factory)
        let values: [Double] = [12.5, -3.25, 1_024, 0, 7.75, 1e9, 0.125]
        for value in values { recorder.record(value) }
        recorder.record(Double.nan)  // cannot be written: left out
        gauge.record(21.5)
        gauge.record(19)
        // Several intervals, only the first with values: wait until three have been written.
        #expect(
            await waitUntil {
                let stored = try? await setup.influx.query(#"SELECT count("value") FROM "temperature""#)
                return ((stored?.first?.rows.first?["count"] as? NSNumber)?.intValue ?? 0) >= 3
            }
        )
        await setup.agent.shutdown(deadline: .seconds(60))

        let series = try await setup.influx.query(#"SELECT * FROM "payload_size" WHERE "metric_type" = 'recorder'"#)
        let rows = try #require(series.first).rows
        #expect(rows.count == 1, "intervals without values write nothing: \(rows)")
        let row = try #require(rows.first)
        #expect(Self.number(row["count"]) == Double(values.count))
        #expect(Self.number(row["min"]) == -3.25)
        #expect(Self.number(row["max"]) == 1e9)
        #expect(Self.number(row["sum"]) == values.reduce(0, +))
        let gaugeRows = try #require(
            try await setup.influx.query(#"SELECT "value" FROM "temperature" WHERE "metric_type" = 'gauge'"#).first
        ).rows
        #expect(gaugeRows.count >= 3 && gaugeRows.allSatisfy { Self.number($0["value"]) == 19 })
    }

    @Test func dimensionsWithAwkwardCharactersComeBackAsTheyWere() async throws {
        let setup = try await Self.setUp("metrics_awkward", interval: .seconds(3_600))
        let dimensions = [
            ("path", "/a b,c=d"), ("quote", #""x\y""#), ("unicode", "é😀"), ("equals=key", "v"), ("queue", "first"),
            ("queue", "last"), ("metric_type", "mine"),
        ]
        let counter = Counter(label: "odd label,with space", dimensions: dimensions, factory: setup.factory)
        counter.increment(by: 3)
        // Same dimensions in another order: the same series.
        Counter(
            label: "odd label,with space",
            dimensions: dimensions.reversed().filter { $0.1 != "first" },
            factory: setup.factory
        )
        .increment(by: 4)
        await setup.agent.shutdown(deadline: .seconds(60))

        let series = try await setup.influx.query(#"SELECT "count" FROM "odd label,with space" GROUP BY *"#)
        #expect(series.count == 1)
        let only = try #require(series.first)
        #expect(
            only.tags == [
                "path": "/a b,c=d", "quote": #""x\y""#, "unicode": "é😀", "equals=key": "v", "queue": "last",
                "metric_type": "counter", "service": setup.agent.configuration.serviceName,
                "instance": setup.agent.configuration.instance,
            ]
        )
        #expect(Self.number(only.values.last?[1]) == 7)
    }

    @Test func eightThreadsCreatingAndDestroyingHandlersLoseNoIncrement() async throws {
        let setup = try await Self.setUp("metrics_threads", interval: .milliseconds(100))
        let label = "increments"
        // Held throughout, so the series is never released while the threads destroy their handles.
        let anchor = Counter(label: label, dimensions: [], factory: setup.factory)
        let factory = setup.factory
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let remaining = Locked(8)
            for _ in 0..<8 {
                Thread.detachNewThread {
                    for _ in 0..<1_000 {
                        let counter = Counter(label: label, dimensions: [], factory: factory)
                        for _ in 0..<1_000 { counter.increment() }
                        counter.destroy()
                    }
                    if remaining.withLock({
                        $0 -= 1
                        return $0 == 0
                    }) {
                        done.resume()
                    }
                }
            }
        }
        withExtendedLifetime(anchor) {}
        await setup.agent.shutdown(deadline: .seconds(60))
        let values = try #require(try await setup.influx.query(#"SELECT "count" FROM "increments""#).first).values
            .compactMap { Self.number($0[1]) }
        #expect(values.last == 8_000_000)
        #expect(values == values.sorted())
    }

    @Test func handlersPastTheCapShareTheOverflowSeriesAndAreCounted() async throws {
        let setup = try await Self.setUp("metrics_cap", interval: .seconds(3_600), maximumSeries: 5)
        for index in 0..<8 {
            let counter = Counter(label: "per_tenant", dimensions: [("tenant", "t\(index)")], factory: setup.factory)
            counter.increment(by: 10)
        }
        // An existing series, made again past the cap: its own, not the overflow.
        Counter(label: "per_tenant", dimensions: [("tenant", "t0")], factory: setup.factory).increment()
        CoreMetrics.Timer(label: "late_timer", dimensions: [], factory: setup.factory).recordMilliseconds(5)
        #expect(setup.agent.metrics.metricsOverflowed == 4)
        await setup.agent.shutdown(deadline: .seconds(60))

        let tenants = try await setup.influx.query(#"SELECT last("count") FROM "per_tenant" GROUP BY "tenant""#)
        #expect(Set(tenants.compactMap { $0.tags["tenant"] }) == ["t0", "t1", "t2", "t3", "t4"])
        #expect(tenants.first { $0.tags["tenant"] == "t0" }.map { Self.number($0.values.first?[1]) } == 11)
        let overflow = try await setup.influx.query(
            #"SELECT * FROM "apihealth_metrics_overflow" GROUP BY "metric_type""#
        )
        let counter = try #require(overflow.first { $0.tags["metric_type"] == "counter" }?.rows.last)
        #expect(Self.number(counter["count"]) == 30)
        let timer = try #require(overflow.first { $0.tags["metric_type"] == "timer" }?.rows.last)
        #expect(Self.number(timer["max"]) == 5)
        let health = try await setup.influx.query(#"SELECT last("metrics_overflowed") FROM "apihealth_agent""#)
        #expect(Self.number(health.first?.values.first?[1]) == 4)
    }
}
