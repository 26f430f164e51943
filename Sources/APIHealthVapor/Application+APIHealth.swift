import APIHealth
import Vapor

extension Application.Clients.Provider {
    /// Vapor's HTTP client, every request it sends recorded with `agent`: `req.client`, `app.client`
    /// and every helper built on `Client.send` (`get`, `post(_:content:)`, …).
    ///
    /// ```swift
    /// app.clients.use(.apihealth(agent, module: "payments"))
    /// ```
    ///
    /// Requests and responses are what they are without APIHealth; each becomes one `apihealth_request`
    /// point with the schema, filter, success rules and trace links of the other capture paths.
    ///
    /// - Parameters:
    ///   - agent: The agent that records the requests.
    ///   - module: The part of the service that makes the calls (the `module` tag); one call can name
    ///     another with `Client.recording(module:)`.
    /// - Returns: The provider, for `app.clients.use(_:)`.
    public static func apihealth(_ agent: APIHealthAgent, module: String) -> Self {
        .init { app in
            app.clients.use { app in
                RecordingClient(
                    base: VaporHTTPClient(
                        http: app.http.client.shared,
                        eventLoop: app.eventLoopGroup.next(),
                        logger: app.logger,
                        byteBufferAllocator: ByteBufferAllocator()
                    ),
                    agent: agent,
                    module: module
                )
            }
        }
    }

    /// Another client (one the application made itself), every request it sends recorded with `agent`.
    ///
    /// ```swift
    /// app.clients.use(.apihealth(agent, module: "payments") { app in SigningClient(app) })
    /// ```
    ///
    /// - Parameters:
    ///   - agent: The agent that records the requests.
    ///   - module: The part of the service that makes the calls (the `module` tag).
    ///   - makeClient: Makes the client to record, as `app.clients.use(_:)` would take it.
    /// - Returns: The provider, for `app.clients.use(_:)`.
    public static func apihealth(
        _ agent: APIHealthAgent,
        module: String,
        wrapping makeClient: @escaping @Sendable (Application) -> any Client
    ) -> Self {
        .init { app in
            app.clients.use { app in RecordingClient(base: makeClient(app), agent: agent, module: module) }
        }
    }
}

extension Client {
    /// This client with its requests recorded under another module: for the calls of one part of the
    /// service, when the application's client is recorded (`app.clients.use(.apihealth(…))`).
    /// A client that is not recorded is returned as it is.
    ///
    /// ```swift
    /// let fraud = try await req.client.recording(module: "fraud").get("https://risk.example.com/score")
    /// ```
    ///
    /// - Parameter module: The `module` tag of the requests sent through the returned client.
    /// - Returns: The client, recording under `module`.
    public func recording(module: String) -> any Client {
        guard let recording = self as? RecordingClient else { return self }
        return RecordingClient(base: recording.base, agent: recording.agent, module: module)
    }

    /// This client with every request it sends recorded with `agent` under `module` (in place of any
    /// recording it had): for a client made apart from `app.clients`.
    ///
    /// ```swift
    /// let score = try await riskClient.recorded(by: agent, module: "fraud").get("https://risk.example.com/score")
    /// ```
    ///
    /// - Parameters:
    ///   - agent: The agent that records the requests.
    ///   - module: The `module` tag of the requests.
    /// - Returns: The client, recording.
    public func recorded(by agent: APIHealthAgent, module: String) -> any Client {
        let base = (self as? RecordingClient)?.base ?? self
        return RecordingClient(base: base, agent: agent, module: module)
    }
}
