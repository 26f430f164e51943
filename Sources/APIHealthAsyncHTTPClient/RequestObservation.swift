@_spi(Package) import APIHealth
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// What is seen of one AsyncHTTPClient request until it ends; records one ``RequestSample`` when it
/// does: at the end of the body, at an error, or when the caller drops the response unfinished.
package final class RequestObservation: EndedRequestSource {
    private let module: String
    private let method: String
    private let url: String
    private let requestHeaders: HTTPHeaders
    /// The trace id to record as the correlation id, when the client propagates the trace itself.
    private let traceID: String?
    private let started = ContinuousClock.now
    private let startedAt = Date()

    private struct Progress {
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
    }

    /// Guards what has been seen so far.
    private let progress: Locked<Progress>

    package init(
        agent: APIHealthAgent,
        module: String,
        method: String,
        url: String,
        requestHeaders: HTTPHeaders,
        requestBytes: UInt64?,
        traceID: String? = nil
    ) {
        self.module = module
        self.method = method
        self.url = url
        self.requestHeaders = requestHeaders
        self.traceID = traceID
        self.progress = Locked(Progress(requestBytes: requestBytes, agent: agent))
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

    package func received(_ bytes: Int) {
        progress.withLock { if !$0.recorded { $0.responseBytes += UInt64(bytes) } }
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
    /// where the observation cannot be kept, from a copy of what it saw).
    private func end(error: (any Error)?, inDeinit: Bool = false) {
        let duration = ContinuousClock.now - started
        let ending = progress.withLock { state -> APIHealthAgent? in
            guard !state.recorded, let agent = state.agent else { return nil }
            state.recorded = true
            state.agent = nil
            state.duration = duration
            state.error = error.map(Self.transportError)
            return agent
        }
        guard let agent = ending else { return }
        if inDeinit {
            agent.recordLater(EndedRequestCopy(endedRequest(progress.withLock { $0 })))
        } else {
            agent.recordLater(self)
        }
    }

    package func makeSample(correlationHeaders: [String]) -> RequestSample? {
        progress.withLock { endedRequest($0) }.sample(correlationHeaders: correlationHeaders)
    }

    package func requestHeader(_ name: String) -> String? { requestHeaders.first(name: name) }

    private func endedRequest(_ state: Progress) -> EndedRequest {
        EndedRequest(
            method: method,
            url: url,
            module: module,
            startedAt: startedAt,
            duration: state.duration ?? .zero,
            statusCode: state.error == nil ? state.status : nil,
            requestBytes: state.requestBytes ?? 0,
            responseBytes: state.responseBytes,
            timeToFirstByte: state.timeToFirstByte,
            redirects: state.redirects ?? max(state.visits - 1, 0),
            error: state.error,
            requestHeaders: requestHeaders,
            responseHeaders: state.responseHeaders,
            traceID: traceID
        )
    }

    /// URLs with a host parsed lately, by their text (see ``ParsedURLCache``).
    private static let parsed = ParsedURLCache()

    package static func parsedURL(_ text: String) -> URL? {
        parsed.url(for: text)
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
        if error is NIOConnectionError || (error as? IOError)?.errnoCode == ECONNREFUSED {
            return .init(domain: NSURLErrorDomain, code: NSURLErrorCannotConnectToHost)
        }
        return .init(error)
    }
}

/// What was seen of a request when it ended, from which its sample is built.
struct EndedRequest: Sendable {
    let method: String
    let url: String
    let module: String
    let startedAt: Date
    let duration: Duration
    let statusCode: Int?
    let requestBytes: UInt64
    let responseBytes: UInt64
    let timeToFirstByte: Duration?
    let redirects: Int
    let error: RequestSample.TransportError?
    let requestHeaders: HTTPHeaders
    let responseHeaders: HTTPHeaders
    /// The trace id the client propagated itself, recorded as the correlation id.
    let traceID: String?

    /// The request's sample, its correlation id the first non-empty value of `correlationHeaders`
    /// (the request's before the response's); `nil` for a URL without a host.
    func sample(correlationHeaders: [String]) -> RequestSample? {
        guard let url = RequestObservation.parsedURL(url) else { return nil }
        return RequestSample(
            method: method,
            url: url,
            module: module,
            startedAt: startedAt,
            duration: duration,
            statusCode: statusCode,
            error: error,
            requestBytes: requestBytes,
            responseBytes: responseBytes,
            timeToFirstByte: timeToFirstByte,
            redirectCount: redirects,
            correlationID: correlationID(correlationHeaders)
        )
    }

    /// The trace id the client propagated, else the value of the earliest of `names` on the request, else on
    /// the response.
    private func correlationID(_ names: [String]) -> String? {
        if let traceID { return traceID }
        return CorrelationID.first(of: names, in: requestHeaders.lazy.map { ($0.name, $0.value) })
            ?? CorrelationID.first(of: names, in: responseHeaders.lazy.map { ($0.name, $0.value) })
    }
}

/// A copy of what an observation saw, handed to the agent in its place when the observation is
/// going away (from its `deinit`, where it cannot be kept).
final class EndedRequestCopy: EndedRequestSource {
    let request: EndedRequest

    init(_ request: EndedRequest) { self.request = request }

    func makeSample(correlationHeaders: [String]) -> RequestSample? {
        request.sample(correlationHeaders: correlationHeaders)
    }

    func requestHeader(_ name: String) -> String? { request.requestHeaders.first(name: name) }
}
