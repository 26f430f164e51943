import APIHealth
import AsyncHTTPClient
import Logging
import NIOCore

/// Runs AsyncHTTPClient requests with APIHealth watching: the same calls, one extra argument.
///
/// ```swift
/// let response = try await httpClient.execute(request, timeout: .seconds(10), recordingTo: agent, module: "billing")
/// for try await chunk in response.body { … }   // the sample ends when the body has been read
/// ```
///
/// Each request becomes one `apihealth_request` point, with the same schema, templating and cap as
/// URLSession capture. What the caller gets back (response head, streamed body, errors, cancellation,
/// timeouts) is what it gets without APIHealth. With
/// `APIHealthConfiguration.CaptureOptions.tracePropagation`, a request to a first-party host gets a
/// `traceparent` header from the calling task's context (unless it has one, or the client has a
/// tracer of its own, which sends its own), and its trace id becomes the request's `correlation_id`.
extension HTTPClient {
    /// Executes `request` as `HTTPClient.execute(_:timeout:logger:)` does, and records it with `agent`.
    ///
    /// The sample's duration runs until the caller has read the body to its end (or an error); a body
    /// the caller never finishes ends the sample when the response is dropped or the task is cancelled.
    ///
    /// - Parameters:
    ///   - request: The request to run.
    ///   - timeout: As for `HTTPClient.execute(_:timeout:logger:)`.
    ///   - agent: The agent that records the request.
    ///   - module: The part of the service that makes the call (the `module` tag).
    ///   - logger: As for `HTTPClient.execute(_:timeout:logger:)`.
    /// - Returns: The response, its body passed through as it arrives.
    /// - Throws: Whatever AsyncHTTPClient throws, unchanged.
    @inlinable
    public func execute(
        _ request: HTTPClientRequest,
        timeout: TimeAmount,
        recordingTo agent: APIHealthAgent,
        module: String,
        logger: Logger? = nil
    ) async throws -> HTTPClientResponse {
        try await execute(request, deadline: .now() + timeout, recordingTo: agent, module: module, logger: logger)
    }

    /// Executes `request` as `HTTPClient.execute(_:deadline:logger:)` does, and records it with `agent`.
    ///
    /// - Parameters:
    ///   - request: The request to run.
    ///   - deadline: As for `HTTPClient.execute(_:deadline:logger:)`.
    ///   - agent: The agent that records the request.
    ///   - module: The part of the service that makes the call (the `module` tag).
    ///   - logger: As for `HTTPClient.execute(_:deadline:logger:)`.
    /// - Returns: The response, its body passed through as it arrives.
    /// - Throws: Whatever AsyncHTTPClient throws, unchanged.
    public func execute(
        _ request: HTTPClientRequest,
        deadline: NIODeadline,
        recordingTo agent: APIHealthAgent,
        module: String,
        logger: Logger? = nil
    ) async throws -> HTTPClientResponse {
        if agent.propagatesTraces {
            var request = request
            let traceID = agent.propagateTrace(into: &request.headers, url: request.url, client: self)
            return try await execute(
                request,
                deadline: deadline,
                recordingTo: agent,
                module: module,
                traceID: traceID,
                logger: logger
            )
        }
        return try await execute(
            request,
            deadline: deadline,
            recordingTo: agent,
            module: module,
            traceID: nil,
            logger: logger
        )
    }

    /// Runs `request` (its trace propagated already, as `traceID`) and records it.
    @inline(__always)
    private func execute(
        _ request: HTTPClientRequest,
        deadline: NIODeadline,
        recordingTo agent: APIHealthAgent,
        module: String,
        traceID: String?,
        logger: Logger?
    ) async throws -> HTTPClientResponse {
        // A request to a GraphQL path: its operation, read from the body it holds (one comparison for any other).
        var graphQLOperation: String?
        if let graphQL = agent.graphQL, graphQL.matches(request.url) {
            graphQLOperation = RequestObservation.graphQLOperation(
                url: request.url,
                body: await RequestObservation.graphQLBody(request.body)
            )
        }
        let observation = RequestObservation(
            agent: agent,
            module: module,
            method: request.method.rawValue,
            url: request.url,
            requestHeaders: request.headers,
            // A request without a body sends none (its headers are looked through only when it has one).
            requestBytes: request.body == nil
                ? 0 : request.headers.first(name: "content-length").flatMap { UInt64($0) },
            traceID: traceID,
            graphQLOperation: graphQLOperation
        )
        var response: HTTPClientResponse
        do {
            response = try await execute(request, deadline: deadline, logger: logger)
        } catch {
            observation.fail(error)
            throw error
        }
        observation.receivedHead(
            status: Int(response.status.code),
            headers: response.headers,
            redirects: max(response.history.count - 1, 0)
        )
        response.body = .stream(ObservedBody(base: response.body, observation: observation))
        return response
    }

    /// Executes `request` with `delegate` as `HTTPClient.execute(request:delegate:deadline:logger:)`
    /// does, and records it with `agent`; the delegate sees exactly what it would see without APIHealth.
    ///
    /// ```swift
    /// let task = httpClient.execute(request: request, delegate: collector, recordingTo: agent, module: "feeds")
    /// let result = try await task.get()
    /// ```
    ///
    /// - Parameters:
    ///   - request: The request to run.
    ///   - delegate: The delegate that receives the response.
    ///   - deadline: As for `HTTPClient.execute(request:delegate:deadline:logger:)`.
    ///   - agent: The agent that records the request.
    ///   - module: The part of the service that makes the call (the `module` tag).
    ///   - logger: As for `HTTPClient.execute(request:delegate:deadline:logger:)`.
    /// - Returns: The task running the request.
    public func execute<Delegate: HTTPClientResponseDelegate>(
        request: Request,
        delegate: Delegate,
        deadline: NIODeadline? = nil,
        recordingTo agent: APIHealthAgent,
        module: String,
        logger: Logger? = nil
    ) -> Task<Delegate.Response> {
        var request = request
        let traceID =
            agent.propagatesTraces
            ? agent.propagateTrace(into: &request.headers, url: request.url.absoluteString, client: self) : nil
        let observation = RequestObservation(
            agent: agent,
            module: module,
            method: request.method.rawValue,
            url: request.url.absoluteString,
            requestHeaders: request.headers,
            requestBytes: nil,
            traceID: traceID,
            // A delegate request's body is a writer: it cannot be read without sending it.
            graphQLOperation: agent.graphQL?.matches(request.url.absoluteString) == true
                ? RequestObservation.graphQLOperation(
                    url: request.url.absoluteString,
                    body: request.body == nil ? .none : .unreadable
                ) : nil
        )
        let recording = RecordingResponseDelegate(wrapping: delegate, observation: observation)
        return execute(
            request: request,
            delegate: recording,
            eventLoop: .indifferent,
            deadline: deadline,
            logger: logger
        )
    }
}
