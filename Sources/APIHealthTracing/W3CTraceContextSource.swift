import APIHealth
import Instrumentation
import W3CTraceContext

/// W3C trace headers from swift-distributed-tracing's `ServiceContext`: a request made inside a span
/// gets that span's trace id with a new span id (and its flags and `tracestate`); one made outside any
/// span starts a new, sampled trace.
///
/// ```swift
/// configuration.capture.tracePropagation = TracePropagation(
///     firstPartyHosts: ["api.example.com"],
///     source: W3CTraceContextSource()
/// )
/// ```
///
/// The span context is read through an instrument (the one bootstrapped with `InstrumentationSystem`
/// unless another is given), the way a tracer such as swift-otel's writes it into the headers it sends.
public struct W3CTraceContextSource: TraceContextSource {
    private let instrument: (any Instrument)?

    /// - Parameter instrument: Reads the span context out of a `ServiceContext`; `nil` uses
    ///   `InstrumentationSystem.instrument` at each request.
    public init(instrument: (any Instrument)? = nil) {
        self.instrument = instrument
    }

    public func traceHeaders() -> TraceHeaders {
        let context: TraceContext
        if let parent = currentContext() {
            context = TraceContext(traceID: parent.traceID, spanID: .random(), flags: parent.flags, state: parent.state)
        } else {
            context = TraceContext(traceID: .random(), spanID: .random(), flags: .sampled, state: TraceState())
        }
        return TraceHeaders(traceparent: context.traceParentHeaderValue, tracestate: context.traceStateHeaderValue)
    }

    public func currentTraceID() -> String? {
        currentContext().map { "\($0.traceID)" }
    }

    /// The W3C trace context of the calling task's `ServiceContext`, as the instrument writes it.
    private func currentContext() -> TraceContext? {
        guard let serviceContext = ServiceContext.current else { return nil }
        var carrier = TraceCarrier()
        (instrument ?? InstrumentationSystem.instrument).inject(
            serviceContext,
            into: &carrier,
            using: TraceCarrier.Writer()
        )
        guard let parent = carrier.traceparent else { return nil }
        return try? TraceContext(traceParentHeaderValue: parent, traceStateHeaderValue: carrier.tracestate)
    }
}

extension TracePropagation {
    /// W3C trace headers from swift-distributed-tracing's `ServiceContext` (see ``W3CTraceContextSource``)
    /// on requests to `firstPartyHosts`, and on no other.
    ///
    /// ```swift
    /// configuration.capture.tracePropagation = .w3c(firstPartyHosts: ["api.example.com", "*.internal.example.com"])
    /// ```
    ///
    /// - Parameters:
    ///   - firstPartyHosts: `api.example.com` (any port), `api.example.com:8443`, `*.example.com` (its subdomains).
    ///   - instrument: Reads the span context out of a `ServiceContext`; `nil` uses `InstrumentationSystem.instrument`.
    /// - Returns: The propagation to set as `capture.tracePropagation`.
    public static func w3c(firstPartyHosts: [String], instrument: (any Instrument)? = nil) -> TracePropagation {
        TracePropagation(firstPartyHosts: firstPartyHosts, source: W3CTraceContextSource(instrument: instrument))
    }
}

/// The two headers an instrument writes a span context into.
private struct TraceCarrier: Sendable {
    var traceparent: String?
    var tracestate: String?

    struct Writer: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout TraceCarrier) {
            switch key.lowercased() {
            case "traceparent": carrier.traceparent = value
            case "tracestate": carrier.tracestate = value
            default: break
            }
        }
    }
}
