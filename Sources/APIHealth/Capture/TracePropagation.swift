import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Trace context for the requests a service makes to its own (first-party) services: a W3C
/// `traceparent` header on each request to a host it names, and on no other, and the trace id as the
/// request's `correlation_id`, so a slow or failed call leads to its trace.
///
/// The `APIHealthTracing` product makes one from swift-distributed-tracing's `ServiceContext`:
///
/// ```swift
/// import APIHealthTracing
///
/// configuration.capture.tracePropagation = .w3c(firstPartyHosts: ["api.example.com", "*.internal.example.com"])
/// ```
///
/// AsyncHTTPClient capture (`execute(_:timeout:recordingTo:module:)`) adds the headers itself. For
/// URLSession, add them to the request before making the task, in the task that has the context
/// (neither Linux's URLSession nor a task-local context reach the hook):
///
/// ```swift
/// var request = URLRequest(url: url)
/// agent.addTraceHeaders(to: &request)
/// let (data, response) = try await session.data(for: request)
/// ```
public struct TracePropagation: Sendable {
    /// The hosts that get trace headers: `api.example.com` (any port), `api.example.com:8443` (that
    /// port only), `*.example.com` (its subdomains). Requests to any other host are left as they are.
    public var firstPartyHosts: [String]
    /// Makes the headers of each request.
    public var source: any TraceContextSource

    /// Trace headers from `source` for requests to `firstPartyHosts` only.
    ///
    /// - Parameters:
    ///   - firstPartyHosts: The hosts that get trace headers (see ``firstPartyHosts``).
    ///   - source: What makes each request's headers.
    public init(firstPartyHosts: [String], source: any TraceContextSource) {
        self.firstPartyHosts = firstPartyHosts
        self.source = source
    }
}

/// Makes the trace headers of one outgoing request from the calling task's context (see
/// ``TracePropagation``; `APIHealthTracing`'s `W3CTraceContextSource` is one).
///
/// ```swift
/// struct FixedTrace: TraceContextSource {
///     func traceHeaders() -> TraceHeaders {
///         TraceHeaders(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
///     }
///     func currentTraceID() -> String? { "4bf92f3577b34da6a3ce929d0e0e4736" }
/// }
/// ```
public protocol TraceContextSource: Sendable {
    /// The headers for a request about to be sent: a new span of the calling task's trace when its
    /// context has one, else the first span of a new trace.
    ///
    /// - Returns: The `traceparent` (and `tracestate`) to send.
    func traceHeaders() -> TraceHeaders
    /// The trace id (32 lowercase hex digits) of the calling task's context, if it has one: what a
    /// client that propagates the context itself sends.
    ///
    /// - Returns: The trace id, or `nil` outside a trace.
    func currentTraceID() -> String?
}

/// The W3C Trace Context headers of one request.
public struct TraceHeaders: Sendable, Hashable {
    /// `00-<trace id>-<span id>-<flags>`.
    public var traceparent: String
    /// Vendor state carried along with the trace, if any.
    public var tracestate: String?

    /// The headers as they are sent.
    ///
    /// - Parameters:
    ///   - traceparent: `00-<trace id>-<span id>-<flags>`.
    ///   - tracestate: Vendor state, if any.
    public init(traceparent: String, tracestate: String? = nil) {
        self.traceparent = traceparent
        self.tracestate = tracestate
    }

    /// The trace id of ``traceparent``, `nil` if it is not a W3C `traceparent`.
    public var traceID: String? { TraceParent.traceID(of: traceparent) }
}

/// Reads the W3C `traceparent` header.
package enum TraceParent {
    package static let headerName = "traceparent"
    package static let stateHeaderName = "tracestate"

    /// The trace id of a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`, any later version with
    /// more parts), lowercased; `nil` for a value of another form or an all-zero id.
    package static func traceID(of value: String) -> String? {
        let bytes = Array(value.utf8)
        guard bytes.count >= 55, bytes[2] == 0x2D, bytes[35] == 0x2D, bytes[52] == 0x2D,
            bytes.count == 55 || bytes[55] == 0x2D,
            !(bytes[0] | 0x20 == 0x66 && bytes[1] | 0x20 == 0x66)
        else { return nil }
        func isHex(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte | 0x20) }
        let id = bytes[3..<35]
        guard bytes[0..<2].allSatisfy(isHex), id.allSatisfy(isHex), bytes[36..<52].allSatisfy(isHex),
            bytes[53..<55].allSatisfy(isHex), id.contains(where: { $0 != 0x30 })
        else { return nil }
        return String(decoding: id, as: UTF8.self).lowercased()
    }
}

/// The configured ``TracePropagation``, its hosts parsed once.
struct TraceInjection: Sendable {
    private let hosts: [HostPattern]
    let source: any TraceContextSource

    init?(_ propagation: TracePropagation?) {
        guard let propagation else { return nil }
        hosts = propagation.firstPartyHosts.compactMap(HostPattern.init)
        source = propagation.source
    }

    /// Whether requests to `url` get trace headers.
    func isFirstParty(_ url: URL) -> Bool {
        hosts.contains { $0.matches(url) }
    }

    /// Whether requests to the URL written `text` get trace headers: read from the text when it is a
    /// plain URL (``URLParts``), else parsed.
    func isFirstParty(urlText text: String) -> Bool {
        if let parts = URLParts(plain: text, readingPath: false) { return hosts.contains { $0.matches(parts) } }
        return URLText.url(text).map(isFirstParty) ?? false
    }
}

extension APIHealthAgent {
    /// The trace headers for a request to `url`: `nil` unless
    /// ``APIHealthConfiguration/CaptureOptions/tracePropagation`` names `url`'s host (and the agent is
    /// enabled). For an HTTP client APIHealth does not capture itself; call it in the task that makes
    /// the request.
    ///
    /// ```swift
    /// if let trace = agent.traceHeaders(for: url) { headers.add(name: "traceparent", value: trace.traceparent) }
    /// ```
    ///
    /// - Parameter url: Where the request goes.
    /// - Returns: The headers to add, or `nil` for a host that is not first-party.
    public func traceHeaders(for url: URL) -> TraceHeaders? {
        guard configuration.isEnabled, let injection = traceInjection, injection.isFirstParty(url) else { return nil }
        return injection.source.traceHeaders()
    }

    /// Adds `traceparent` (and `tracestate`) to `request` when its host is one of
    /// ``TracePropagation/firstPartyHosts``; leaves a request that carries a `traceparent` already, or
    /// goes elsewhere, as it is. Call it in the task that has the trace context, before the session
    /// makes the task: the instrumented session records the trace id as the request's `correlation_id`.
    ///
    /// ```swift
    /// var request = URLRequest(url: URL(string: "https://api.example.com/users/7")!)
    /// agent.addTraceHeaders(to: &request)
    /// let (data, response) = try await session.data(for: request)
    /// ```
    ///
    /// - Parameter request: The request to add the headers to.
    public func addTraceHeaders(to request: inout URLRequest) {
        guard let url = request.url, request.value(forHTTPHeaderField: TraceParent.headerName) == nil,
            let trace = traceHeaders(for: url)
        else { return }
        request.setValue(trace.traceparent, forHTTPHeaderField: TraceParent.headerName)
        if let state = trace.tracestate, request.value(forHTTPHeaderField: TraceParent.stateHeaderName) == nil {
            request.setValue(state, forHTTPHeaderField: TraceParent.stateHeaderName)
        }
    }

    /// The trace id of the calling task's context when trace propagation is configured for `url`'s host:
    /// for a client that propagates the context itself (AsyncHTTPClient with a tracer of its own).
    package func currentTraceID(forURLText url: String) -> String? {
        guard configuration.isEnabled, let injection = traceInjection, injection.isFirstParty(urlText: url) else {
            return nil
        }
        return injection.source.currentTraceID()
    }

    /// ``traceHeaders(for:)`` for a URL given as text (AsyncHTTPClient's and Vapor's requests), read
    /// without parsing it when it is plain.
    package func traceHeaders(forURLText url: String) -> TraceHeaders? {
        guard configuration.isEnabled, let injection = traceInjection, injection.isFirstParty(urlText: url) else {
            return nil
        }
        return injection.source.traceHeaders()
    }
}
