import Foundation
import APIHealth
import TestSupport
import Testing

@Suite struct DemoTests {
    @Test func sigtermFlushesEverythingBeforeExit() async throws {
        let influx = try await InfluxDB1.freshDatabase("demo")
        let spool = temporaryDirectory("demo")
        let demo = try Child(
            "apihealth-demo", ["--duration", "120", "--rate", "60"],
            environment: [
                "INFLUX_URL": influx.base.absoluteString, "INFLUX_WRITE_API": "v1", "INFLUX_DATABASE": influx.database,
                "APIHEALTH_SPOOL_DIR": spool.path, "APIHEALTH_FLUSH_DELAY_MS": "60000",
            ])
        try await Task.sleep(for: .seconds(3))
        demo.signal(SIGTERM)
        let status = await demo.wait(timeout: .seconds(30))
        #expect(status == 0, "\(demo.stderr)")
        let summary = demo.stdout
        func number(_ label: String) -> Int? {
            summary.split(separator: "\n").first { $0.contains(label) }.flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        let requests = try #require(number("requests"))
        #expect(requests > 60, "the demo ran for about 3 seconds at 60 requests/s")
        #expect(number("points pending") == 0)
        #expect(number("points dropped") == 0)
        let counted = try await influx.query("SELECT count(duration_ms) FROM apihealth_request")
        #expect((counted.first?.rows.first?["count"] as? NSNumber)?.intValue == requests, "every request is stored after SIGTERM")
        let failures = try await influx.query("SELECT count(\"count\") FROM apihealth_parse_failure")
        #expect((failures.first?.rows.first?["count"] as? NSNumber)?.intValue == number("parse failures") ?? -1 || number("parse failures") == 0)
        #expect(try SpoolReader(directory: spool).segments().allSatisfy { $0.lines.isEmpty })
        // The demo's own swift-metrics, the last values written at shutdown.
        let calls = try await influx.query(#"SELECT last("count") FROM "demo_calls" GROUP BY "module""#)
        #expect(calls.count == 3 && calls.compactMap { ($0.rows.first?["last"] as? NSNumber)?.intValue }.reduce(0, +) == requests)
        let timed = try await influx.query(#"SELECT sum("count") FROM "demo_call_duration" WHERE "metric_type" = 'timer'"#)
        #expect((timed.first?.rows.first?["sum"] as? NSNumber)?.intValue == requests)
        let inFlight = try await influx.query(#"SELECT last("value") FROM "demo_calls_in_flight" GROUP BY "module""#)
        #expect(inFlight.count == 3 && inFlight.allSatisfy { ($0.rows.first?["last"] as? NSNumber)?.doubleValue == 0 })
    }
}
