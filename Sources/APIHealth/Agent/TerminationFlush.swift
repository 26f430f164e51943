import Foundation
import ServiceLifecycle
import UnixSignals

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension APIHealthAgent {
    /// For a plain process without a `ServiceGroup` of its own: runs the agent until one of `signals`
    /// arrives, then sends what is pending within ``APIHealthConfiguration/shutdownDeadline`` and
    /// returns. Signals are handled by swift-service-lifecycle (`UnixSignals`), so the process goes on
    /// to its own clean-up afterwards.
    ///
    /// ```swift
    /// let agent = try APIHealthAgent(configuration: .fromEnvironment(serviceName: "worker"), logger: logger)
    /// try await agent.runUntilTerminated()   // until SIGTERM or SIGINT
    /// ```
    ///
    /// - Parameter signals: The signals that begin a graceful shutdown.
    /// - Throws: ``LifecycleError`` when the agent already runs or has run.
    public func runUntilTerminated(signals: [UnixSignal] = [.sigterm, .sigint]) async throws {
        let group = ServiceGroup(services: [self], gracefulShutdownSignals: signals, logger: logger)
        try await group.run()
    }

    /// For a plain process without a `ServiceGroup`: on SIGTERM or SIGINT, shuts the agent down
    /// (sending what is pending within `deadline`) and then exits with 128 + the signal number.
    ///
    /// ```swift
    /// agent.start()
    /// let signals = agent.shutdownOnTermination()   // keep it alive as long as it should act
    /// ```
    ///
    /// - Parameters:
    ///   - signals: The signals to act on; each is ignored by the process from then on, and handled here.
    ///   - deadline: How long to keep sending what is pending before exiting; `nil` is
    ///     ``APIHealthConfiguration/shutdownDeadline``.
    /// - Returns: The signal sources; they act only for as long as they are kept.
    @available(*, deprecated, message: "Use runUntilTerminated(signals:), which returns instead of calling exit")
    public func shutdownOnTermination(
        signals: [Int32] = [SIGTERM, SIGINT],
        deadline: Duration? = nil
    ) -> [any DispatchSourceSignal] {
        let deadline = deadline ?? configuration.shutdownDeadline
        return signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in
                Task {
                    await self?.shutdown(deadline: deadline)
                    exit(128 + number)
                }
            }
            source.resume()
            return source
        }
    }
}
