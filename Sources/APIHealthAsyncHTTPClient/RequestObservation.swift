@_spi(Package) import APIHealth
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// What is seen of one AsyncHTTPClient request until it ends; records one ``RequestSample`` when it
/// does: at the end of the body, at an error, or when the caller drops the response unfinished.
package final class RequestObservation: EndedRequestSource {
    /// What the request is, fixed when it starts.
    private let request: StartedRequest
    /// When it started, for its duration and time to first byte.
    private let started = ContinuousClock.now

    /// Guards what has been seen so far.
    private let progress: Locked<RequestProgress>

    package init(
        agent: APIHealthAgent,
        module: String,
        method: String,
        url: String,
        requestHeaders: HTTPHeaders,
        requestBytes: UInt64?,
        traceID: String? = nil,
        graphQLOperation: String? = nil
    ) {
        self.request = StartedRequest(
            method: method,
            url: url,
            module: module,
            requestHeaders: requestHeaders,
            traceID: traceID,
            graphQLOperation: graphQLOperation,
            startedAt: Date().timeIntervalSinceReferenceDate
        )
        // Made in place: a copy would retain the agent once more (a slow retain: the hook holds it weakly).
        self.progress = Locked(
            RequestProgress(requestBytes: requestBytes, agent: agent, digest: agent.digestsBodies ? BodyDigest() : nil)
        )
    }

    deinit {
        // Dropped before the body was read to its end: the sample ends here.
        end(error: nil, inDeinit: true)
    }

    package func receivedHead(status: Int, headers: HTTPHeaders, redirects: Int?) {
        let now = ContinuousClock.now
        progress.withLock { state in
            if state.recorded { return }
            if state.timeToFirstByte == nil { state.timeToFirstByte = now - started }
            state.status = status
            state.responseHeaders = headers
            if let redirects { state.redirects = redirects }
        }
    }

    /// A response head arrived (a redirect's or the final one's): one more than the redirects followed.
    package func visitedURL() {
        progress.withLock { if !$0.recorded { $0.visits += 1 } }
    }

    package func sent(_ bytes: Int) {
        progress.withLock { if !$0.recorded { $0.requestBytes = ($0.requestBytes ?? 0) + UInt64(bytes) } }
    }

    /// Part of the body arrived: counted, and with cache advice digested as it passes (never kept).
    package func received(_ chunk: ByteBuffer) {
        progress.withLock { state in
            if state.recorded { return }
            state.responseBytes += UInt64(chunk.readableBytes)
            if state.digest != nil { chunk.withUnsafeReadableBytes { state.digest?.update($0) } }
        }
    }

    package func finish() { end(error: nil) }

    /// Ends the sample with `error`, unless AsyncHTTPClient refused the request before starting it
    /// (a URL it cannot use): then nothing is recorded, as nothing was sent.
    package func fail(_ error: any Error) {
        if Self.refusedBeforeStarting(error) {
            progress.withLock { state in
                state.recorded = true
                state.agent = nil
            }
            return
        }
        end(error: error)
    }

    /// Ends the sample; the agent builds and records it later, off the caller's path (from `deinit`,
    /// where the observation cannot be kept, from a copy of what it saw). The clock is read only for a
    /// sample that ends here, not for an observation let go of after its end.
    private func end(error: (any Error)?, inDeinit: Bool = false) {
        let ending = progress.withLock { state -> APIHealthAgent? in
            guard !state.recorded, let agent = state.agent else { return nil }
            state.recorded = true
            state.agent = nil
            state.duration = ContinuousClock.now - started
            state.error = error.map(Self.transportError)
            // A body not read to its end (dropped unread, failed) has no digest: the advisor compares nothing.
            if error != nil || inDeinit { state.digest = nil }
            return agent
        }
        guard let agent = ending else { return }
        if inDeinit {
            agent.recordLater(EndedRequestCopy(request: request, progress: progress.withLock { $0 }))
        } else {
            agent.recordLater(self)
        }
    }

    package func makeSample(correlationHeaders: [String]) -> RequestSample? {
        progress.withLock { request.sample(progress: $0, correlationHeaders: correlationHeaders) }
    }

    package func requestHeader(_ name: String) -> String? { request.requestHeaders.first(name: name) }

    package func responseHeader(_ name: String) -> String? {
        progress.withLock { $0.responseHeaders.first(name: name) }
    }

    package func cacheEvidence() -> CacheEvidence? {
        progress.withLock { request.cacheEvidence(progress: $0) }
    }

    /// The body bytes digested so far; `nil` without cache advice (when no byte of the body is read) and
    /// once a body ends unread.
    package var digestedBytes: UInt64? { progress.withLock { $0.digest?.length } }

    /// What capture can read of a request's body for its GraphQL operation.
    package enum GraphQLBody {
        case none
        /// The whole body, as the request holds it.
        case bytes(ByteBuffer)
        /// A body that cannot be read without consuming it (a stream, a writer).
        case unreadable
    }

    /// The GraphQL operation's segment of a request to `url` with `body`, for a request the caller found to go
    /// to one of the agent's GraphQL paths (``APIHealthAgent/graphQL``).
    package static func graphQLOperation(url: String, body: GraphQLBody) -> String {
        let query = GraphQLEndpoints.query(of: url)
        switch body {
        case .none: return GraphQLOperation.segment(body: nil, query: query)
        case .unreadable: return GraphQLOperation.segment(unreadableBodyWithQuery: query)
        case .bytes(let buffer):
            return buffer.withUnsafeReadableBytes { GraphQLOperation.segment(bodyBytes: $0, query: query) }
        }
    }

    /// The bytes of an `HTTPClientRequest`'s body when it holds them and can give them more than once (made
    /// with `.bytes(_:)`, of a buffer or a collection): AsyncHTTPClient says which in an internal `mode`, read
    /// here by reflection (its label and flag only); the bytes then come through the body's own public
    /// `AsyncSequence`, which for such a body makes them at once. Any other body (a sequence read once, an
    /// async sequence, a mode not known here) is unreadable and is never iterated.
    package static func graphQLBody(_ body: HTTPClientRequest.Body?) async -> GraphQLBody {
        guard let body else { return .none }
        guard let mode = Mirror(reflecting: body).children.first(where: { $0.label == "mode" })?.value,
            let stored = Mirror(reflecting: mode).children.first
        else { return .unreadable }
        switch stored.label {
        case "byteBuffer": break
        case "sequence":
            let flag = Mirror(reflecting: stored.value).children.first { $0.label == "canBeConsumedMultipleTimes" }
            guard flag?.value as? Bool == true else { return .unreadable }
        default: return .unreadable
        }
        var iterator = body.makeAsyncIterator()
        guard let first = try? await iterator.next() else { return .unreadable }
        return .bytes(first)
    }

    /// Whether `error` says this machine's network is down or has no route out (`ENETDOWN`, `ENETUNREACH`), on
    /// every address a connection tried.
    static func isNetworkDown(_ error: any Error) -> Bool {
        func down(_ error: any Error) -> Bool {
            guard let code = (error as? IOError)?.errnoCode else { return false }
            return code == ENETDOWN || code == ENETUNREACH
        }
        if let connection = error as? NIOConnectionError {
            return !connection.connectionErrors.isEmpty && connection.connectionErrors.allSatisfy { down($0.error) }
        }
        return down(error)
    }

    static func refusedBeforeStarting(_ error: any Error) -> Bool {
        guard let clientError = error as? HTTPClientError else { return false }
        if [.invalidURL, .emptyHost, .emptyScheme, .missingSocketPath].contains(clientError) { return true }
        return String(describing: clientError).contains("unsupportedScheme")
    }

    /// AsyncHTTPClient's errors in the terms the URLSession capture uses (`NSURLErrorDomain` codes),
    /// so dashboards group transport failures the same way whichever client saw them.
    static func transportError(_ error: any Error) -> RequestSample.TransportError {
        if error is CancellationError { return .init(domain: NSURLErrorDomain, code: NSURLErrorCancelled) }
        if let clientError = error as? HTTPClientError {
            switch clientError {
            case .readTimeout, .connectTimeout, .deadlineExceeded, .writeTimeout:
                return .init(domain: NSURLErrorDomain, code: NSURLErrorTimedOut)
            case .cancelled:
                return .init(domain: NSURLErrorDomain, code: NSURLErrorCancelled)
            case .remoteConnectionClosed:
                return .init(domain: NSURLErrorDomain, code: NSURLErrorNetworkConnectionLost)
            default:
                return .init(domain: "HTTPClientError", code: 0)
            }
        }
        // No network on this machine (down, or no route from it): the device's failure, not the API's, as
        // URLSession on Apple platforms reports it.
        if Self.isNetworkDown(error) {
            return .init(domain: NSURLErrorDomain, code: NSURLErrorNotConnectedToInternet)
        }
        if error is NIOConnectionError || (error as? IOError)?.errnoCode == ECONNREFUSED {
            return .init(domain: NSURLErrorDomain, code: NSURLErrorCannotConnectToHost)
        }
        return .init(error)
    }
}

/// What a request is, fixed when it starts.
struct StartedRequest: Sendable {
    let method: String
    let url: String
    let module: String
    let requestHeaders: HTTPHeaders
    /// The trace id the client propagated itself, recorded as the correlation id.
    let traceID: String?
    /// The GraphQL operation's segment, for a request to a GraphQL path (see ``RequestObservation/graphQLOperation(url:body:)``).
    let graphQLOperation: String?
    /// When the request started, as `Date`'s seconds since its reference date (a `Date` would make the
    /// struct's layout known only at run time, its fields found through its metadata on every use).
    let startedAt: TimeInterval

    /// The request's sample after `progress`, its correlation id the first non-empty value of
    /// `correlationHeaders` (the request's before the response's); `nil` for a URL without a host.
    func sample(progress: RequestProgress, correlationHeaders: [String]) -> RequestSample? {
        // A plain URL stays text (the agent reads it as text); any other is parsed, and needs a host.
        guard let kept = URLText.kept(url) else { return nil }
        let correlationID = traceID ?? correlationID(correlationHeaders, responseHeaders: progress.responseHeaders)
        var sample = RequestSample(
            method: method,
            urlText: url,
            module: module,
            startedAt: Date(timeIntervalSinceReferenceDate: startedAt),
            duration: progress.duration ?? .zero,
            statusCode: progress.error == nil ? progress.status : nil,
            error: progress.error,
            requestBytes: progress.requestBytes ?? 0,
            responseBytes: progress.responseBytes,
            timeToFirstByte: progress.timeToFirstByte,
            redirectCount: progress.redirects ?? max(progress.visits - 1, 0),
            correlationID: correlationID
        )
        if case .url(let parsed) = kept { sample.url = parsed }
        if let graphQLOperation { sample.setGraphQLOperation(graphQLOperation) }
        return sample
    }

    /// What the cache advisor reads of the response after `progress`: `nil` without one.
    func cacheEvidence(progress: RequestProgress) -> CacheEvidence? {
        guard let status = progress.status else { return nil }
        let headers = progress.responseHeaders
        let policy = CachePolicy(
            method: method,
            statusCode: status,
            requestHeader: { requestHeaders.first(name: $0) },
            header: { headers.first(name: $0) }
        )
        return CacheEvidence(policy: policy, digest: progress.error == nil ? progress.digest : nil)
    }

    /// The value of the earliest of `names` on the request, else on the response.
    private func correlationID(_ names: [String], responseHeaders: HTTPHeaders) -> String? {
        CorrelationID.first(of: names, in: requestHeaders.lazy.map { ($0.name, $0.value) })
            ?? CorrelationID.first(of: names, in: responseHeaders.lazy.map { ($0.name, $0.value) })
    }
}

/// What has been seen of a request so far.
struct RequestProgress: Sendable {
    var timeToFirstByte: Duration?
    var status: Int?
    var responseHeaders: HTTPHeaders = [:]
    var redirects: Int?
    var visits = 0
    var requestBytes: UInt64?
    var responseBytes: UInt64 = 0
    var recorded = false
    /// The agent to record with, until the sample ends: let go of then, so the observation waiting
    /// in the agent's queue never keeps the agent alive.
    var agent: APIHealthAgent?
    /// Set when the sample ends.
    var duration: Duration?
    var error: RequestSample.TransportError?
    /// The digest of the body so far, with cache advice; `nil` once the body ends unread or fails.
    var digest: BodyDigest?
}

/// A copy of what an observation saw, handed to the agent in its place when the observation is
/// going away (from its `deinit`, where it cannot be kept).
final class EndedRequestCopy: EndedRequestSource {
    let request: StartedRequest
    let progress: RequestProgress

    init(request: StartedRequest, progress: RequestProgress) {
        self.request = request
        self.progress = progress
    }

    func makeSample(correlationHeaders: [String]) -> RequestSample? {
        request.sample(progress: progress, correlationHeaders: correlationHeaders)
    }

    func requestHeader(_ name: String) -> String? { request.requestHeaders.first(name: name) }

    func responseHeader(_ name: String) -> String? { progress.responseHeaders.first(name: name) }

    func cacheEvidence() -> CacheEvidence? { request.cacheEvidence(progress: progress) }
}
