import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension APIHealthAgent {
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
    ///   - deadline: How long to keep sending what is pending before exiting.
    /// - Returns: The signal sources; they act only for as long as they are kept.
    public func shutdownOnTermination(
        signals: [Int32] = [SIGTERM, SIGINT],
        deadline: Duration = .seconds(10)
    ) -> [any DispatchSourceSignal] {
        signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in
                Task.detached {
                    await self?.shutdown(deadline: deadline)
                    exit(128 + number)
                }
            }
            source.resume()
            return source
        }
    }
}
