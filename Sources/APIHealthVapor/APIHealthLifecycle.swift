import APIHealth
import Vapor

/// Runs an agent with a Vapor application: started when the application boots, and at shutdown stopped
/// after the HTTP server has finished the requests in flight (whose outgoing calls are recorded) and
/// before Vapor shuts its HTTP client down, sending what is pending on the way.
///
/// ```swift
/// app.lifecycle.use(APIHealthLifecycle(agent))
/// ```
///
/// Vapor shuts lifecycle handlers down in the reverse order of registration: register this one before
/// any handler whose work makes outgoing calls (a queue worker), so the agent stops after them.
public struct APIHealthLifecycle: LifecycleHandler {
    /// The agent run with the application.
    public let agent: APIHealthAgent
    /// How long shutdown keeps sending what is pending (`APIHealthConfiguration.shutdownDeadline`
    /// unless given).
    public let shutdownDeadline: Duration

    /// A handler that runs `agent` with the application it is registered with.
    ///
    /// - Parameters:
    ///   - agent: The agent to start at boot and shut down with the application.
    ///   - shutdownDeadline: How long shutdown keeps sending what is pending; the agent's configured
    ///     deadline by default.
    public init(_ agent: APIHealthAgent, shutdownDeadline: Duration? = nil) {
        self.agent = agent
        self.shutdownDeadline = shutdownDeadline ?? agent.configuration.shutdownDeadline
    }

    /// Starts the agent (`app.boot()`, the synchronous path).
    ///
    /// - Parameter application: The application booting.
    public func didBoot(_ application: Application) {
        agent.start()
    }

    /// Starts the agent (`app.execute()` and `app.asyncBoot()`).
    ///
    /// - Parameter application: The application booting.
    public func didBootAsync(_ application: Application) async {
        agent.start()
    }

    /// Stops the application's server (it finishes the requests in flight; Vapor's own shutdown, which
    /// comes later, then finds it stopped), then the agent, which sends what is pending.
    ///
    /// - Parameter application: The application shutting down.
    public func shutdownAsync(_ application: Application) async {
        await application.server.shutdown()
        await agent.shutdown(deadline: shutdownDeadline)
    }

    /// As ``shutdownAsync(_:)``, for `app.shutdown()` (the synchronous path, called outside Swift
    /// concurrency): waits on the calling thread for the agent to stop.
    ///
    /// - Parameter application: The application shutting down.
    public func shutdown(_ application: Application) {
        application.server.shutdown()
        let stopped = DispatchSemaphore(value: 0)
        let agent = agent
        let deadline = shutdownDeadline
        Task {
            await agent.shutdown(deadline: deadline)
            stopped.signal()
        }
        stopped.wait()
    }
}
