@_spi(Package) import APIHealth
import LineProtocol
import ServiceLifecycle

/// Writes the relay's health point (``RelayHealthPoint``) through its agent every
/// ``RelayConfiguration/healthInterval``, and a last one when shutdown begins: run it in the service group
/// after the agent, so that the agent, shut down after it, sends that last point.
///
/// ```swift
/// let group = ServiceGroup(services: [agent, RelayHealthService(intake: intake), server], …)
/// ```
package struct RelayHealthService: Service {
    let intake: RelayIntake

    package init(intake: RelayIntake) {
        self.intake = intake
    }

    package func run() async throws {
        let interval = intake.configuration.healthInterval
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            // Ends early when shutdown begins: the point written then is the last.
            _ = try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            writePoint()
        }
    }

    /// Writes one health point now.
    package func writePoint() {
        let table = intake.clientTable
        let agent = intake.agent
        agent.write(
            RelayHealthPoint.point(
                intake.counters,
                clients: table.count,
                clientsEvicted: table.evicted,
                metrics: agent.metrics,
                tags: agent.configuration.everyPointTags,
                at: agent.nowTimestamp
            )
        )
    }
}
