import APIHealth
import APIHealthRelay
import Logging
import ServiceLifecycle
import Vapor

#if canImport(Glibc)
import Glibc
#endif

/// `apihealth-relay`: takes installs' writes with app keys, checks them against the schema and forwards
/// them through an agent configured from the environment (`INFLUX_*`, `APIHEALTH_SPOOL_DIR`, …) to the
/// database. SIGTERM or SIGINT stops intake, finishes the requests in flight, writes a last health point
/// and sends what is pending.
@main
enum Relay {
    static func main() async {
        let logger = Logger(label: "apihealth-relay")
        do {
            let configuration = try RelayConfiguration.fromEnvironment()
            let agentConfiguration = try APIHealthConfiguration.fromEnvironment(serviceName: "apihealth-relay")
            guard !agentConfiguration.destinations.isEmpty else {
                throw RelayConfigurationError(variable: "INFLUX_URL", reason: "is not set: the relay forwards to it")
            }
            let agent = try APIHealthAgent(configuration: agentConfiguration, logger: logger)
            let intake = RelayIntake(configuration: configuration, agent: agent)
            // Vapor logs every request at info: the relay's own counts are its health point.
            var httpLogger = Logger(label: "apihealth-relay.http")
            httpLogger.logLevel = .notice
            let application = try await Application.make(.production, logger: httpLogger)
            let server = RelayServer(application: application, intake: intake, logger: logger)
            let group = ServiceGroup(
                services: [agent, RelayHealthService(intake: intake), server],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
            try await group.run()
            try await application.asyncShutdown()
        } catch {
            logger.error("apihealth-relay cannot run", metadata: ["apihealth.error": "\(error)"])
            exit(1)
        }
    }
}
