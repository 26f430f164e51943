import Foundation
import LineProtocol
import Logging
import TestSupport
import Testing

@testable import APIHealth

/// What the agent says about itself in its `apihealth_agent` points, read back from InfluxDB 1.x.
@Suite struct AgentSelfReportTests {
    /// InfluxDB's error bodies end in a line break. The agent's own `last_error` carries such a
    /// message, but it is not user data the encoder repaired: `points_repaired` stays 0.
    @Test func theAgentsOwnErrorTextIsNotCountedAsRepairedData() async throws {
        let influx = try await InfluxDB1.freshDatabase("own_error")
        var configuration = APIHealthConfiguration(
            serviceName: "own-error",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = nil
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "own-error"))
        agent.start()
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        agent.write(
            Point(
                measurement: "conflict",
                fields: [Point.Field("v", .int(1))],
                timestamp: Timestamp(nanosecondsSinceEpoch: now)
            )
        )
        #expect(await agent.flush(waitingUpTo: eventTimeout))
        // The same field as a string: InfluxDB refuses it (a field type conflict) with a message ending in "\n".
        agent.write(
            Point(
                measurement: "conflict",
                fields: [Point.Field("v", .string("text"))],
                timestamp: Timestamp(nanosecondsSinceEpoch: now + 1)
            )
        )
        #expect(await agent.flush(waitingUpTo: eventTimeout))
        let lastError = try #require(agent.metrics.lastError)
        #expect(lastError.hasSuffix("\n"), "the server's message as it came: \(lastError.debugDescription)")
        await agent.shutdown(deadline: eventTimeout)
        #expect(agent.metrics.pointsRejected == 1)
        #expect(agent.metrics.pointsRepaired == 0, "the agent's own text is not repaired user data")
        let health = try await influx.query("SELECT * FROM apihealth_agent").first?.rows ?? []
        let row = try #require(health.last)
        #expect((row["points_repaired"] as? NSNumber)?.intValue == 0)
        let stored = try #require(row["last_error"] as? String)
        #expect(!stored.contains("\u{FFFD}") && !stored.contains("\n"), "\(stored.debugDescription)")
        #expect(stored.contains("field type conflict"), "\(stored)")
    }

    /// The agent's last health point after a clean shutdown reports the final counts: written after the
    /// final send, then sent itself.
    @Test func theLastHealthPointAfterACleanShutdownReportsTheFinalCounts() async throws {
        let influx = try await InfluxDB1.freshDatabase("final_health")
        var configuration = APIHealthConfiguration(
            serviceName: "final-health",
            destination: InfluxDestination(url: influx.base, api: .v1(database: influx.database))
        )
        configuration.spool = SpoolOptions(directory: temporaryDirectory("final-health"))
        configuration.selfMetricsInterval = noPeriodicHealthPoint
        let agent = try APIHealthAgent(configuration: configuration, logger: Logger(label: "final-health"))
        agent.start()
        let now = Int64(Date().timeIntervalSince1970) * 1_000_000_000
        for index in 0..<465 {
            agent.write(
                Point(
                    measurement: "work",
                    fields: [Point.Field("n", .int(Int64(index)))],
                    timestamp: Timestamp(nanosecondsSinceEpoch: now + Int64(index))
                )
            )
        }
        await agent.shutdown(deadline: eventTimeout)
        #expect(agent.metrics.pendingLines == 0)
        #expect(agent.metrics.pointsWritten == 466, "the points and the last health point")
        let health = try await influx.query("SELECT * FROM apihealth_agent").first?.rows ?? []
        #expect(health.count == 1)
        let row = try #require(health.last)
        #expect((row["pending_lines"] as? NSNumber)?.intValue == 0, "\(row)")
        #expect((row["points_written"] as? NSNumber)?.intValue == 465, "\(row)")
        #expect((row["points_recorded"] as? NSNumber)?.intValue == 465, "\(row)")
        #expect((row["batches_written"] as? NSNumber)?.intValue ?? 0 >= 1, "\(row)")
    }
}
