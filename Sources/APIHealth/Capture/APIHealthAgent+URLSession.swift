import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIHealthAgent {
    // MARK: URLSession

    /// Hooks every http(s) request made with sessions created from `configuration` afterwards.
    ///
    /// Requests behave exactly as without the hook: on Linux each one goes out once, from the app's
    /// own session (its delegate decides redirects and authentication as before); on Apple platforms
    /// it is re-issued on an inner session made from a copy of `configuration` as it is now, so set
    /// the configuration's other options first. Instrumenting the same configuration again, for the
    /// same agent and module, changes nothing; there is no limit on instrumented configurations.
    /// A configuration instrumented by an agent that is gone passes its requests through untouched.
    ///
    /// ```swift
    /// let configuration = URLSessionConfiguration.default
    /// configuration.timeoutIntervalForRequest = 10
    /// agent.instrument(configuration, module: "search")
    /// let session = URLSession(configuration: configuration)
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: The configuration whose sessions' requests are recorded.
    ///   - module: The part of the service that makes these calls (the `module` tag).
    public func instrument(_ configuration: URLSessionConfiguration, module: String) {
        guard self.configuration.isEnabled else { return }
        let hook = CaptureRegistry.shared.hook(
            for: configuration,
            module: module,
            recorder: CaptureRecorder(agent: self),
            identity: self
        )
        configuration.protocolClasses =
            [hook] + (configuration.protocolClasses ?? []).filter { !($0 is InterceptingURLProtocol.Type) }
    }

    /// Hooks `configuration` as ``instrument(_:module:)`` does.
    ///
    /// - Parameters:
    ///   - configuration: The configuration whose sessions' requests are recorded.
    ///   - module: The part of the service that makes these calls (the `module` tag).
    ///   - streamsResponseBodies: Ignored: bodies pass through exactly as URLSession delivers them.
    @available(
        *,
        deprecated,
        message: "Bodies now pass through exactly as URLSession delivers them; use instrument(_:module:)"
    )
    public func instrument(_ configuration: URLSessionConfiguration, module: String, streamsResponseBodies: Bool) {
        instrument(configuration, module: module)
    }

    /// Counts a request the hook let through without recording it.
    func countUncaptured() {
        pending.count(.counted(\.requestsUncaptured))
    }

}
