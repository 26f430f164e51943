import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// Only the agent's own files in its spool are read, shipped or removed; checked against InfluxDB 1.x.
@Suite struct SpoolOwnershipTests {
    /// Files in a marked spool that the agent did not name (`notes.lp`, `x.lp`) are neither read,
    /// shipped nor removed.
    @Test func filesTheAgentDidNotNameAreNeitherShippedNorRemoved() async throws {
        let influx = try await InfluxDB1.freshDatabase("foreign_files")
        let spool = temporaryDirectory("foreign-files")
        var keeping = APIHealthConfiguration(serviceName: "foreign-files")
        keeping.spool = SpoolOptions(directory: spool)
        keeping.selfMetricsInterval = noPeriodicHealthPoint
        // The agent marks the directory as its spool.
        await (try APIHealthAgent(configuration: keeping, logger: Logger(label: "foreign-files"))).shutdown()
        #expect(FileManager.default.fileExists(atPath: spool.appendingPathComponent(SpoolDirectory.markerName).path))
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        let foreign = ["notes.lp": "notes v=1i \(now)\n", "x.lp": "x v=2i \(now)\n"]
        for (name, text) in foreign { try Data(text.utf8).write(to: spool.appendingPathComponent(name)) }

        var sending = APIHealthConfiguration(
            serviceName: "foreign-files",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        sending.spool = SpoolOptions(directory: spool)
        sending.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: sending, logger: Logger(label: "foreign-files"))
        agent.start()
        agent.write(Point(measurement: "ours", fields: ["v": 3], timestamp: Timestamp(nanosecondsSinceEpoch: now)))
        await agent.shutdown(deadline: eventTimeout)
        #expect(agent.metrics.pendingLines == 0)
        let ours = try await influx.query("SELECT count(v) FROM ours")
        #expect((ours.first?.rows.first?["count"] as? NSNumber)?.intValue == 1, "the agent's own line is shipped")
        for measurement in ["notes", "x"] {
            let rows = try await influx.query("SELECT count(v) FROM \(measurement)")
            #expect(rows.isEmpty, "\(measurement): \(rows)")
        }
        for (name, text) in foreign {
            #expect(
                try String(contentsOf: spool.appendingPathComponent(name), encoding: .utf8) == text,
                "\(name) is left as it was"
            )
        }
    }
}
