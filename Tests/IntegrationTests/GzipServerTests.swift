@_spi(Benchmarking) import APIHealth
import Foundation
import LineProtocol
import TestSupport
import Testing

/// Gzip bodies as the real servers take them (the unit tests are in APIHealthTests' GzipTests).
@Suite struct GzipServerTests {
    @Test(arguments: Gzip.Implementation.allCases)
    func influxDB1AcceptsTheGzipBody(implementation: Gzip.Implementation) async throws {
        let influx = try await InfluxDB1.freshDatabase("gzip")
        var lines: [UInt8] = []
        for index in 0..<500 {
            try LineEncoder().encode(
                Point(
                    measurement: "gzip",
                    tags: [Point.Tag("n", "\(index)")],
                    fields: [Point.Field("v", .float(Double(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000)
                ),
                into: &lines
            )
        }
        let reply = try await influx.write(lines, gzip: implementation)
        #expect(reply.status == 204, "\(reply.text)")
        let rows = try await influx.query("SELECT count(v) FROM gzip")
        #expect(rows.first?.values.first?.last as? Int == 500, "\(rows)")
    }

    @Test(arguments: Gzip.Implementation.allCases)
    func victoriaMetricsAcceptsTheGzipBody(implementation: Gzip.Implementation) async throws {
        let victoria = try VictoriaMetrics()
        let measurement = "gzip_\(UInt32.random(in: 0...UInt32.max))"
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        var lines: [UInt8] = []
        for index in 0..<500 {
            try LineEncoder().encode(
                Point(
                    measurement: measurement,
                    tags: [Point.Tag("n", "\(index)")],
                    fields: [Point.Field("v", .float(Double(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: now)
                ),
                into: &lines
            )
        }
        let reply = try await victoria.write(lines, gzip: implementation)
        #expect(reply.status == 204, "\(reply.text)")
        var exported: [VictoriaMetrics.Series] = []
        _ = try await waitUntil {
            exported = try await victoria.export(namePattern: "\(measurement)_v")
            return exported.count >= 500
        }
        #expect(exported.count == 500)
        #expect(Set(exported.compactMap { $0.labels["n"].flatMap(Double.init) }) == Set(exported.flatMap(\.values)))
    }
}
