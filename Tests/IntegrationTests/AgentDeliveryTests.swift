import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

@Suite struct AgentDeliveryTests {
    @Test func aHundredThousandPointsReachVictoriaMetricsThroughTheV2API() async throws {
        let victoria = try VictoriaMetrics()
        let measurement = "delivery_\(UInt32.random(in: 0...UInt32.max))"
        var configuration = APIHealthConfiguration(
            serviceName: "delivery",
            destination: InfluxDestination(url: victoria.base, api: .v2(organization: "acme", bucket: "apis"))
        )
        configuration.spool = SpoolOptions(directory: temporaryDirectory("delivery"))
        configuration.batching.flushDelay = .milliseconds(200)
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "delivery"))
        agent.start()
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        for index in 0..<100_000 {
            agent.write(
                Point(
                    measurement: measurement,
                    tags: [Point.Tag("shard", "s\(index % 10)")],
                    fields: [Point.Field("value", .uint(UInt64(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: now - Int64(index) * 1_000_000)
                )
            )
        }
        await agent.shutdown(deadline: .seconds(60))
        let metrics = agent.metrics
        #expect(metrics.pointsWritten >= 100_000)
        #expect(metrics.pendingLines == 0 && metrics.pointsDropped == 0)
        #expect(metrics.bytesAfterGzip * 5 < metrics.bytesBeforeGzip, "gzip shrinks the batches")
        var total = 0
        var values = Set<Double>()
        _ = try await waitUntil {
            let series = try await victoria.export(namePattern: "\(measurement)_value")
            total = series.reduce(0) { $0 + $1.values.count }
            values = Set(series.flatMap(\.values))
            return total >= 100_000
        }
        #expect(total == 100_000)
        #expect(values == Set((0..<100_000).map(Double.init)))
    }

    @Test func theV1APIWritesExactValuesToInfluxDB1() async throws {
        let influx = try await InfluxDB1.freshDatabase("agent_v1")
        var configuration = APIHealthConfiguration(
            serviceName: "v1",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = nil
        configuration.precision = .us
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "v1"))
        agent.start()
        let started = Date(timeIntervalSince1970: 1_763_800_000.123456)
        agent.record(
            RequestSample(
                method: "POST",
                url: URL(string: "https://api.example.com/orders/123456/items?secret=1")!,
                module: "checkout",
                startedAt: started,
                duration: .microseconds(12_345_678),
                statusCode: 201,
                requestBytes: 512,
                responseBytes: 2_048,
                timeToFirstByte: .microseconds(8_250_000),
                redirectCount: 1,
                correlationID: "abc-123"
            )
        )
        await agent.shutdown(deadline: .seconds(60))
        let rows = try await influx.query("SELECT * FROM apihealth_request").first?.rows ?? []
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect((row["time"] as? NSNumber)?.int64Value == 1_763_800_000_123_456_000)
        #expect(row["host"] as? String == "api.example.com")
        #expect(row["path"] as? String == "/orders/{id}/items")
        #expect(row["method"] as? String == "POST")
        #expect(row["module"] as? String == "checkout")
        #expect(row["status"] as? String == "201")
        #expect(row["status_class"] as? String == "2xx")
        #expect((row["duration_ms"] as? NSNumber)?.doubleValue == 12_345.678)
        #expect((row["ttfb_ms"] as? NSNumber)?.doubleValue == 8_250)
        #expect((row["status_code"] as? NSNumber)?.int64Value == 201)
        #expect((row["redirects"] as? NSNumber)?.int64Value == 1)
        #expect(row["success"] as? Bool == true)
        #expect(row["correlation_id"] as? String == "abc-123")
        #expect(row["service"] as? String == "v1")
        #expect(row["instance"] as? String == configuration.instance)
        #expect(agent.metrics.pointsWritten == 3, "the request, its interval point and the agent's own health point")
        let health = try await influx.query("SELECT * FROM apihealth_agent").first?.rows ?? []
        #expect(health.count == 1)
        #expect(health.first?["service"] as? String == "v1")
        #expect((health.first?["points_recorded"] as? NSNumber)?.intValue == 2)
        // The interval point of the same request, with its histogram cumulative over the bucket bounds.
        let interval = try #require(
            try await influx.query("SELECT * FROM apihealth_request_interval").first?.rows.first
        )
        #expect(interval["path"] as? String == "/orders/{id}/items")
        #expect(interval["status_class"] as? String == "2xx")
        #expect(interval["status"] == nil)
        #expect(interval["service"] as? String == "v1")
        #expect((interval["count"] as? NSNumber)?.int64Value == 1)
        #expect((interval["errors"] as? NSNumber)?.int64Value == 0)
        #expect((interval["duration_ms_sum"] as? NSNumber)?.doubleValue == 12_345.678)
        #expect((interval["duration_ms_max"] as? NSNumber)?.doubleValue == 12_345.678)
        #expect((interval["request_bytes"] as? NSNumber)?.int64Value == 512)
        #expect((interval["le_10000"] as? NSNumber)?.int64Value == 0)
        #expect((interval["le_15000"] as? NSNumber)?.int64Value == 1)
        #expect((interval["le_inf"] as? NSNumber)?.int64Value == 1)
    }

    @Test func pointsRecordedJustBeforeShutdownAreStoredWhenItReturns() async throws {
        let influx = try await InfluxDB1.freshDatabase("shutdown")
        var configuration = APIHealthConfiguration(
            serviceName: "shutdown",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = SpoolOptions(directory: temporaryDirectory("shutdown"))
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "shutdown"))
        agent.start()
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        for index in 0..<1_000 {
            agent.write(
                Point(
                    measurement: "last_words",
                    fields: [Point.Field("n", .int(Int64(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: now + Int64(index))
                )
            )
        }
        await agent.shutdown(deadline: .seconds(60))
        let series = try await influx.query("SELECT count(n) FROM last_words")
        #expect((series.first?.rows.first?["count"] as? NSNumber)?.intValue == 1_000)
        #expect(agent.metrics.pointsDropped == 0)
        #expect(!agent.write(Point(measurement: "late", fields: ["v": 1])), "intake is closed after shutdown")
        #expect(agent.metrics.pointsDropped == 1)
    }

    @Test func linesKeptWithUnsignedValuesAreStoredByInfluxDB1() async throws {
        let influx = try await InfluxDB1.freshDatabase("leftovers")
        let spool = temporaryDirectory("leftovers")
        defer { try? FileManager.default.removeItem(at: spool) }
        // Recorded with no destination: unsigned values are written with the `u` suffix.
        var keeping = APIHealthConfiguration(serviceName: "leftovers")
        keeping.spool = SpoolOptions(directory: spool)
        keeping.selfMetricsInterval = noPeriodicHealthPoint
        let first = try APIHealthAgent(configuration: keeping, logger: Logger(label: "leftovers"))
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        for index in 0..<100 {
            first.write(
                Point(
                    measurement: "kept",
                    fields: [Point.Field("bytes", .uint(index == 0 ? .max : UInt64(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: now + Int64(index))
                )
            )
        }
        await first.shutdown()
        // Sent later to InfluxDB 1.x, which has no unsigned type.
        var sending = APIHealthConfiguration(
            serviceName: "leftovers",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        sending.spool = SpoolOptions(directory: spool)
        let second = try APIHealthAgent(configuration: sending, logger: Logger(label: "leftovers"))
        second.start()
        await second.shutdown(deadline: .seconds(60))
        #expect(second.metrics.pointsRejected == 0)
        #expect(second.metrics.pointsRepaired == 1, "the one value above Int64.max, clamped and counted")
        let rows = try await influx.query("SELECT bytes FROM kept").first?.rows ?? []
        #expect(rows.count == 100)
        let values = Set(rows.compactMap { ($0["bytes"] as? NSNumber)?.int64Value })
        #expect(values == Set((1..<100).map(Int64.init) + [Int64.max]))
    }
}
