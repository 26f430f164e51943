import APIHealth
import APIHealthAsyncHTTPClient
import Vapor

/// A Vapor `Client` that records every request it sends with an agent, as the AsyncHTTPClient capture
/// does (same observation, same schema), and passes requests, responses and errors through unchanged.
///
/// Vapor's `ClientResponse` arrives with its body already read, so a sample's duration runs from the
/// call to `send` until the whole response is in, and it has no time to first byte.
struct RecordingClient: Client {
    let base: any Client
    let agent: APIHealthAgent
    let module: String

    var eventLoop: any EventLoop { base.eventLoop }

    var byteBufferAllocator: ByteBufferAllocator { base.byteBufferAllocator }

    func delegating(to eventLoop: any EventLoop) -> any Client { wrapping(base.delegating(to: eventLoop)) }

    func logging(to logger: Logger) -> any Client { wrapping(base.logging(to: logger)) }

    func allocating(to byteBufferAllocator: ByteBufferAllocator) -> any Client {
        wrapping(base.allocating(to: byteBufferAllocator))
    }

    /// The same recording around another client (the base after Vapor has moved it to a request's event
    /// loop, logger or allocator).
    func wrapping(_ client: any Client) -> RecordingClient {
        RecordingClient(base: client, agent: agent, module: module)
    }

    func send(_ request: ClientRequest) -> EventLoopFuture<ClientResponse> {
        guard agent.configuration.isEnabled else { return base.send(request) }
        var request = request
        let url = request.url.string
        if agent.propagatesTraces { propagateTrace(into: &request.headers, url: url) }
        let observation = RequestObservation(
            agent: agent,
            module: module,
            method: request.method.rawValue,
            url: url,
            requestHeaders: request.headers,
            requestBytes: UInt64(request.body?.readableBytes ?? 0),
            graphQLOperation: agent.graphQL?.matches(url) == true
                ? RequestObservation.graphQLOperation(url: url, body: request.body.map { .bytes($0) } ?? .none) : nil
        )
        return base.send(request).always { result in
            switch result {
            case .success(let response):
                observation.receivedHead(status: Int(response.status.code), headers: response.headers, redirects: nil)
                if let body = response.body { observation.received(body) }
                observation.finish()
            case .failure(let error):
                observation.fail(error)
            }
        }
    }

    /// Adds W3C trace headers for a first-party host, unless the request has a `traceparent` already.
    /// Vapor's client sends requests through AsyncHTTPClient's delegate API, which injects no trace
    /// headers of its own, so the request's headers are the whole story.
    private func propagateTrace(into headers: inout HTTPHeaders, url: String) {
        guard !headers.contains(name: "traceparent"), let trace = agent.traceHeaders(forURLText: url) else { return }
        headers.add(name: "traceparent", value: trace.traceparent)
        if let state = trace.tracestate, !headers.contains(name: "tracestate") {
            headers.add(name: "tracestate", value: state)
        }
    }
}
