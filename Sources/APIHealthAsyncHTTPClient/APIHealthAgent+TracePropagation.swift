import APIHealth
import AsyncHTTPClient
import NIOHTTP1
import Tracing

extension APIHealthAgent {
    /// Adds the trace headers for a request to `url` to `headers` when trace propagation names its host,
    /// unless the request carries a `traceparent` already or `client` propagates the trace itself (it has
    /// a tracer: AsyncHTTPClient then sends its own `traceparent`). Returns the trace id to record in the
    /// latter case, which the request's headers do not show.
    func propagateTrace(into headers: inout HTTPHeaders, url: String, client: HTTPClient) -> String? {
        guard propagatesTraces else { return nil }
        if let tracer = client.tracer, !(tracer is NoOpTracer) { return currentTraceID(forURLText: url) }
        guard !headers.contains(name: "traceparent"), let trace = traceHeaders(forURLText: url) else { return nil }
        headers.add(name: "traceparent", value: trace.traceparent)
        if let state = trace.tracestate, !headers.contains(name: "tracestate") {
            headers.add(name: "tracestate", value: state)
        }
        return nil
    }
}
