import APIHealthSummary
import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// `influx-tail --summary` on a spool whose raw points are sampled: the interval points give the counts.
@Suite struct SummaryFromIntervalsTests {
    /// 20,000 requests of one endpoint with 5 % errors and durations of 1…100 ms, recorded with
    /// `errors-and-slow`, shut down so the last interval points are in the spool.
    func writeSampledSpool(_ directory: URL) async throws {
        var configuration = APIHealthConfiguration(serviceName: "summary-intervals")
        configuration.spool = SpoolOptions(directory: directory)
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        configuration.capture.rawPoints = .errorsAndSlow
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "summary-intervals"))
        agent.start()
        let start = Date(timeIntervalSince1970: 1_763_800_000)
        for index in 0..<20_000 {
            agent.record(
                RequestSample(
                    method: "GET",
                    url: URL(string: "https://a.example.com/users/\(index % 50)")!,
                    module: "accounts",
                    startedAt: start.addingTimeInterval(Double(index) / 1_000),
                    duration: .milliseconds(index % 100 + 1),
                    statusCode: index % 20 == 0 ? 500 : 200
                )
            )
        }
        await agent.shutdown(deadline: .seconds(60))
    }

    @Test func anErrorsAndSlowSpoolShowsTrueCountsAndPercentilesWithinTheirBucket() async throws {
        let spool = temporaryDirectory("summary-intervals")
        try await writeSampledSpool(spool)
        let (rows, run) = try await summaryRows(["--spool", spool.path])
        #expect(run.status == 0, "\(run.stderr)")
        let row = try #require(rows.first { ($0["path"] as? String) == "/users/{id}" }, "\(rows)")
        #expect(row["requests"] as? Int == 20_000, "\(row)")
        #expect(row["errors"] as? Int == 1_000, "\(row)")
        #expect(row["source"] as? String == "interval_points", "\(row)")
        #expect(row["percentiles"] as? String == "bucket_bounds", "\(row)")
        // The true p50, p95, p99 are 50, 95 and 99 ms; each shown as its bucket's upper bound.
        let bounds = AggregationOptions.defaultDurationBoundaries.map {
            Double($0.components.seconds * 1_000) + Double($0.components.attoseconds) / 1e15
        }
        for (key, truth) in [("p50_ms", 50.0), ("p95_ms", 95.0), ("p99_ms", 99.0)] {
            let shown = try #require((row[key] as? NSNumber)?.doubleValue, "\(key): \(row)")
            let bucket = try #require(bounds.first { $0 >= truth })
            #expect(shown == bucket, "\(key) \(shown) is the upper bound of the bucket of \(truth)")
        }
        let table = try await Child.run(
            "influx-tail",
            ["--spool", spool.path, "--summary"],
            environment: ["COLUMNS": "200"]
        )
        #expect(table.stdout.contains("read from interval points"), "\(table.stdout)")
        #expect(table.stdout.contains("≤"), "\(table.stdout)")
    }
}
